"""Database and Redis work over a scenario, as differences of server counters.

PostgreSQL: `pg_stat_statements` (statements by verb) when the server preloads it; always
`pg_stat_database` (transactions, rows written) and `pg_stat_user_tables` (table scans) of the
benchmark's database only. Backends report their counters when a transaction ends at most once
a second, or within 10 s of going idle (PostgreSQL 15+), so a snapshot is read after a quiet
settle time. Redis: INFO counters of the whole server (other clients included).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import psycopg
import redis

STATEMENT_VERBS = ("SELECT", "INSERT", "UPDATE", "DELETE")


@dataclass
class DbSnapshot:
    xacts: int
    rows_inserted: int
    rows_updated: int
    rows_deleted: int
    table_scans: int
    statements: dict[str, int] | None  # by verb, from pg_stat_statements when available


class DbCounters:
    """Reads the counters of one database through its own connection (one transaction a read)."""

    def __init__(self, database_url: str) -> None:
        self._conn = psycopg.connect(database_url, autocommit=True)
        self.statements_available = self._enable_statements()

    def _enable_statements(self) -> bool:
        row = self._conn.execute("SHOW shared_preload_libraries").fetchone()
        if not row or "pg_stat_statements" not in str(row[0]):
            return False  # creating the extension would not help: its view would error
        try:
            self._conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            self._conn.execute("SELECT 1 FROM pg_stat_statements LIMIT 1")
        except psycopg.Error:
            return False
        return True

    def snapshot(self) -> DbSnapshot:
        with self._conn.transaction():
            db = self._conn.execute(
                "SELECT xact_commit + xact_rollback, tup_inserted, tup_updated, tup_deleted "
                "FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()
            scans = self._conn.execute(
                "SELECT coalesce(sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)), 0) FROM pg_stat_user_tables"
            ).fetchone()
            statements = None
            if self.statements_available:
                rows = self._conn.execute(
                    "SELECT upper(split_part(ltrim(query), ' ', 1)), sum(calls) FROM pg_stat_statements "
                    "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) GROUP BY 1"
                ).fetchall()
                statements = {str(verb): int(calls) for verb, calls in rows}
        assert db is not None
        assert scans is not None
        return DbSnapshot(int(db[0]), int(db[1]), int(db[2]), int(db[3]), int(scans[0]), statements)

    def close(self) -> None:
        self._conn.close()


def db_per_turn(before: DbSnapshot, after: DbSnapshot, turns: int) -> dict[str, Any]:
    """The work between two snapshots, divided by the turns it served."""
    n = max(turns, 1)
    # The `before` read is itself one committed transaction of this connection.
    result: dict[str, Any] = {
        "source": "pg_stat_statements" if after.statements is not None else "pg_stat_database",
        "transactions_per_turn": round((after.xacts - before.xacts - 1) / n, 1),
        "rows_written_per_turn": round(
            (
                (after.rows_inserted - before.rows_inserted)
                + (after.rows_updated - before.rows_updated)
                + (after.rows_deleted - before.rows_deleted)
            )
            / n,
            1,
        ),
        "rows_inserted_per_turn": round((after.rows_inserted - before.rows_inserted) / n, 1),
        "table_scans_per_turn": round((after.table_scans - before.table_scans) / n, 1),
    }
    if after.statements is not None and before.statements is not None:
        by_verb = {
            verb: (after.statements.get(verb, 0) - before.statements.get(verb, 0)) / n for verb in after.statements
        }
        result["statements_per_turn"] = round(sum(by_verb.values()), 1)
        verbs = (*STATEMENT_VERBS, *sorted(set(by_verb) - set(STATEMENT_VERBS)))
        result["statements_by_verb_per_turn"] = {verb: round(by_verb.get(verb, 0.0), 1) for verb in verbs}
    return result


@dataclass
class RedisSnapshot:
    connections: int
    commands: int


def redis_snapshot(url: str) -> RedisSnapshot:
    client = redis.Redis.from_url(url)
    try:
        info = cast(dict[str, Any], client.info("stats"))  # sync client: a dict, not an awaitable
    finally:
        client.close()
    return RedisSnapshot(int(info["total_connections_received"]), int(info["total_commands_processed"]))


def redis_per_turn(before: RedisSnapshot, after: RedisSnapshot, turns: int) -> dict[str, Any]:
    n = max(turns, 1)
    return {
        "scope": "whole Redis server",
        "connections_opened_per_turn": round((after.connections - before.connections - 1) / n, 1),
        "commands_per_turn": round((after.commands - before.commands) / n, 1),
    }


class PostgresPids:
    """Processes of PostgreSQL that serve the benchmark: its database's backends and the server's
    background processes (WAL writer, checkpointer, ...), not other databases' backends."""

    def __init__(self, maintenance_url: str, database: str) -> None:
        self._conn = psycopg.connect(maintenance_url, autocommit=True)
        self._database = database

    def __call__(self) -> list[int]:
        rows = self._conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s OR backend_type <> 'client backend'",
            [self._database],
        ).fetchall()
        return [int(pid) for (pid,) in rows]

    def close(self) -> None:
        self._conn.close()
