"""Two kinds of commit: durable for what the coachee was told is saved, fast for bookkeeping.

PostgreSQL waits for its write-ahead log to reach the disk on every commit, about 4 ms on
this kind of machine (p95 8 ms), and a turn commits dozens of times. Bookkeeping -- agent
runs in progress and their outputs, the shared prompt, the brief, blackboard versions,
prediction ledger rows -- can commit without that wait (`synchronous_commit = off`): a crash
of PostgreSQL itself may lose its last fraction of a second of such commits, never corrupt
them, and any later durable commit flushes them too. An interrupted turn is re-run or ends
with the fallback.

What is never written this way: the coachee's messages (accepted before they are
acknowledged), delivered replies, safety notices, account changes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction


@contextmanager
def bookkeeping_atomic() -> Iterator[None]:
    """A transaction whose commit does not wait for the disk (see the module docstring).

    Inside an enclosing transaction it is a plain savepoint: SET LOCAL would apply to the
    whole outer transaction, which may hold durable writes."""
    if connection.in_atomic_block:
        with transaction.atomic():
            yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
        yield
