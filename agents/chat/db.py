"""Database calls from the event loop (Daphne's consumers and Coach), on a pool of threads.

channels' database_sync_to_async runs every call of a process on one thread (asgiref's
thread-sensitive executor): one call that waits -- a row lock, a slow statement, a Redis or
broker round trip inside it -- queues every other coachee's accept, Coach start and finish
behind it. The ORM needs no particular thread: each thread has its own connection, lent by
the pool for the call and handed back after it (close_old_connections, as channels does).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from channels.db import DatabaseSyncToAsync
from django.conf import settings
from django.db import connections

P = ParamSpec("P")
R = TypeVar("R")

_executor = ThreadPoolExecutor(max_workers=settings.COACHING_DB_THREADS, thread_name_prefix="db")


def db_call(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`func` as a coroutine function run on one of the database threads."""
    return DatabaseSyncToAsync(func, thread_sensitive=False, executor=_executor)


def close_thread_connections() -> None:
    """Close the connection each database thread holds (each thread closes its own: one task
    per thread, held at a barrier until all have started). For the end of a test session: a
    connection a thread kept would stop the test database from being dropped."""
    threads = settings.COACHING_DB_THREADS
    all_started = threading.Barrier(threads)

    def close_own() -> None:
        all_started.wait(timeout=10)
        connections.close_all()

    for done in [_executor.submit(close_own) for _ in range(threads)]:
        done.result()
