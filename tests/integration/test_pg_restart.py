"""A process fault with real processes: PostgreSQL restarted while a turn's agents run.

The module owns a throwaway PostgreSQL 15 cluster (initdb in a temporary directory, on a free
port): restarting the machine's own server on 5432 would break every other test run that shares
it. pytest-django's test database (this module's override of `django_db_setup`) and the Daphne
and Celery processes (`stack_env` reads the same settings) all use that cluster; the settings are
put back for the modules that run after this one.

After the restart: the coachee got an answer for the turn (Synth's reply or the honest fallback),
nothing is stored twice, the user's message is kept, and the next turn runs to its full answer.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, connections

from agents.models import Agent, AgentRun, Message, Role, RunStatus, Turn
from agents.pipeline import runner
from tests.support.faults import (
    TEXT,
    Conversation,
    assert_consistent,
    conversation,
    finish,
    first_turn_with_trio_in_flight,
    synth_reply,
)
from tests.support.fixtures import make_stack
from tests.support.stack import OUTPUT_DIR, free_port

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
    pytest.mark.usefixtures("close_thread_connections"),
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server to start a private Redis"),
]

__all__ = ["make_stack"]  # the fixture, imported to be used here

PG_BIN = Path(os.environ.get("COACHING_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
# The specialists answer well after the restart is over, so they write on connections that
# died with the server they were opened to.
TRIO = ("persona", "plasticity", "stability")
SLOW_TRIO = {agent: {"ttft_ms": 6000} for agent in TRIO}


# --- A PostgreSQL cluster of our own ------------------------------------------------------


@dataclass
class PrivateCluster:
    """initdb's cluster in a temporary directory, on 127.0.0.1:`port`, trust authentication."""

    directory: Path
    port: int

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def log(self) -> Path:
        return self.directory / "postgres.log"

    def pg(self, tool: str, *args: str) -> None:
        # initdb and postgres refuse to run as root: as root, run them as the postgres user.
        as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*as_owner, str(PG_BIN / tool), *args], check=True, capture_output=True, timeout=60)

    def init(self) -> None:
        self.pg("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")

    def start(self) -> None:
        options = (
            f"-c port={self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.directory}"
            " -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        self.pg("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "-t", "30", "start")

    def stop(self) -> None:
        # fast: every client's connection is cut now, as a restart by an operator or a failover does.
        self.pg("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "30", "stop")


@pytest.fixture(scope="module")
def private_postgres() -> Iterator[PrivateCluster]:
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"needs PostgreSQL's initdb and pg_ctl in {PG_BIN} to run a private cluster")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        pytest.skip("as root, needs runuser to run initdb as the postgres user")
    OUTPUT_DIR.mkdir(exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix="coaching-pg-"))
    if os.geteuid() == 0:
        shutil.chown(directory, "postgres")
    cluster = PrivateCluster(directory, free_port())
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        with suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            cluster.stop()
        with suppress(OSError):
            shutil.copyfile(cluster.log, OUTPUT_DIR / "pgrestart-postgres.log")
        shutil.rmtree(directory, ignore_errors=True)


def _drop_connections() -> None:
    """Close this process's connections and its pool, so the next ones go where the settings say."""
    connections.close_all()
    for wrapper in connections.all():
        close_pool = getattr(wrapper, "close_pool", None)  # PostgreSQL's backend only
        if close_pool is not None:
            close_pool()


@pytest.fixture(scope="module")
def django_db_setup(
    django_test_environment: None, django_db_blocker: Any, private_postgres: PrivateCluster
) -> Iterator[None]:
    """pytest-django's test database, on the private cluster, for this module only. The
    settings' dict is the one the connection holds, so it is changed in place, then restored."""
    from django.test.utils import setup_databases

    db = settings.DATABASES["default"]
    saved = {key: db[key] for key in ("NAME", "HOST", "PORT")}
    with django_db_blocker.unblock():
        _drop_connections()
        db.update(NAME="coaching", HOST="127.0.0.1", PORT=str(private_postgres.port))
        setup_databases(verbosity=0, interactive=False, serialized_aliases=set())
    try:
        yield
    finally:
        with django_db_blocker.unblock():
            _drop_connections()  # the cluster goes with the fixture: no database to drop
            db.update(saved)


@pytest.fixture
def reconnect_after_the_test(transactional_db: None) -> Iterator[None]:
    """The main thread's connection (the fixtures' seeds) died in the restart: hand it back
    (the pool discards it) before pytest-django empties the tables on a fresh one."""
    yield
    connections.close_all()


# --- The fault ----------------------------------------------------------------------------


def direct_connection() -> psycopg.Connection[Any]:
    """A connection to the test database of its own, outside the ORM and its pool."""
    db = settings.DATABASES["default"]
    return psycopg.connect(f"host={db['HOST']} port={db['PORT']} user={db['USER']} dbname={db['NAME']}")


def restart(cluster: PrivateCluster, down_s: float) -> None:
    cluster.stop()
    time.sleep(down_s)  # long enough for clients to try and fail
    cluster.start()


def stored_rows(convo: Conversation, turn_id: int) -> dict[str, Any]:
    """What the private cluster holds for the session, read on a connection of its own (not the
    ORM's pool): the user's messages, the turn's answer and how each of its agents' runs ended."""
    with direct_connection() as conn:
        user_texts = conn.execute(
            f"SELECT text FROM {Message._meta.db_table} WHERE session_id = %s AND role = %s ORDER BY id",
            [convo.session.pk, Role.USER],
        ).fetchall()
        answer = conn.execute(f"SELECT synth_message_id FROM {Turn._meta.db_table} WHERE id = %s", [turn_id]).fetchone()
        runs = conn.execute(
            f"SELECT agent, status FROM {AgentRun._meta.db_table} WHERE turn_id = %s AND round = 1", [turn_id]
        ).fetchall()
    return {"user_texts": [text for (text,) in user_texts], "answer": answer[0] if answer else None, "runs": dict(runs)}


@pytest.mark.usefixtures("reconnect_after_the_test")
async def test_postgres_restarted_while_the_trio_runs(
    make_stack: Any, live_sim: Any, private_postgres: PrivateCluster
) -> None:
    stack = await asyncio.to_thread(make_stack, "pgrestart", deadline_s=25)
    live_sim.configure(agents=SLOW_TRIO)
    convo = await conversation(stack, "pg-restart")
    client, turn_id = await first_turn_with_trio_in_flight(convo, live_sim)
    restarted_at = time.monotonic()
    await asyncio.to_thread(restart, private_postgres, 1.5)
    # This thread's connection (the one `conversation` used) died too: the pool lends a new one.
    await sync_to_async(connections.close_all)()

    await convo.until_turn_done(client, turn_id, timeout_s=40)
    with suppress(Exception):
        await client.__aexit__()
    await finish(convo, turn_id, timeout_s=30)  # reconnect and resume if the socket missed it
    took = time.monotonic() - restarted_at
    first = synth_reply(convo, turn_id)  # an answer reached the coachee: Synth's or the fallback

    # The system is whole again: the next message gets Synth's full answer.
    live_sim.configure(agents={agent: {"ttft_ms": 20} for agent in TRIO})
    client = await convo.connect()
    await client.send({"type": "user.message", "client_id": "c-2", "text": "Tomorrow I will try again."})
    second = (await client.until(lambda e: e["type"] == "message.accepted" and e["client_id"] == "c-2"))["turn_id"]
    await convo.until_turn_done(client, second, timeout_s=40)
    await client.__aexit__()
    await finish(convo, second, timeout_s=30)

    # One Turn, one user message and one final answer per turn; every event once by seq.
    summary = await sync_to_async(assert_consistent)(convo, turns=2)
    assert synth_reply(convo, second)["fallback"] is False
    rows = await asyncio.to_thread(stored_rows, convo, turn_id)
    assert rows["user_texts"] == [TEXT, "Tomorrow I will try again."]
    assert rows["answer"] == first["message_id"]  # the answer delivered is the one stored
    # The specialists' answers came after the restart and are kept: none was thrown away with
    # its dead connection, and no run was left 'running' for ever.
    assert {agent: rows["runs"].get(agent) for agent in TRIO} == dict.fromkeys(TRIO, RunStatus.SUCCEEDED), rows
    assert RunStatus.RUNNING not in rows["runs"].values(), rows
    print(
        f"\npostgres restarted mid-turn: first turn answered {took:.1f} s after the restart began, "
        f"fallback={first['fallback']}; the next turn delivered; {summary}"
    )


def test_an_agent_runs_end_is_written_when_its_connection_died_during_the_model_call(turn: Turn) -> None:
    """The fix the test above needs, in isolation: a worker's thread holds its connection
    through the model call, and the server ends it meanwhile."""
    run = AgentRun.objects.create(turn=turn, agent=Agent.PERSONA)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    with direct_connection() as admin:
        # What a fast shutdown does to every connection: "terminating connection due to
        # administrator command"; waits until the backend is gone.
        assert admin.execute("SELECT pg_terminate_backend(%s, 5000)", [pid]).fetchone() == (True,)
    run.status = RunStatus.SUCCEEDED
    run.parsed_output = {"kept": True}
    runner._finish_run(run, time.monotonic(), 1, 100, 20, '{"kept": true}', [])
    run.refresh_from_db()
    assert (run.status, run.parsed_output, run.attempts) == (RunStatus.SUCCEEDED, {"kept": True}, 1)
