"""Change stamps (models.ChangeStamp): one number that says whether a process's copy of the
agents' setup is still current.

PostgreSQL triggers renew them (migration 0015); nothing in Python writes them.
"""

from __future__ import annotations

from django.db import connection

from agents.models import ChangeStamp, CoachingSession

SETUP = "setup"


def versions(keys: list[str]) -> dict[str, int]:
    """The current version of each key (0 for one never renewed)."""
    found = dict(ChangeStamp.objects.filter(key__in=keys).values_list("key", "version"))
    return {key: int(found.get(key, 0)) for key in keys}


def next_seq_with_versions(session_id: int, keys: list[str]) -> tuple[int, list[int]]:
    """The session's next sequence number and the versions of `keys`, in one statement.

    Read after the session's row lock is held (the caller's select_for_update): a writer that
    took the lock before us has committed, so its change is counted in these versions."""
    # One UPDATE ... RETURNING: the row lock serialises concurrent writers of one session.
    stamp_table = ChangeStamp._meta.db_table
    columns = ["last_seq", *(f"COALESCE((SELECT version FROM {stamp_table} WHERE key = %s), 0)" for _ in keys)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {CoachingSession._meta.db_table} SET last_seq = last_seq + 1 WHERE id = %s "
            f"RETURNING {', '.join(columns)}",
            [session_id, *keys],
        )
        row = cursor.fetchone()
    if row is None:
        raise CoachingSession.DoesNotExist(session_id)
    return int(row[0]), [int(v) for v in row[1:]]
