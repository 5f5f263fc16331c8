"""Database calls from the event loop (Daphne's consumers and Coach), on a pool of threads.

channels' database_sync_to_async runs every call of a process on one thread (asgiref's
thread-sensitive executor): one call that waits -- a row lock, a slow statement, a Redis or
broker round trip inside it -- queues every other coachee's accept, Coach start and finish
behind it. The ORM needs no particular thread: each thread has its own connection, lent by
the pool for the call and handed back after it (close_old_connections, as channels does).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from channels.db import DatabaseSyncToAsync
from django.conf import settings

P = ParamSpec("P")
R = TypeVar("R")

_executor = ThreadPoolExecutor(max_workers=settings.COACHING_DB_THREADS, thread_name_prefix="db")


def db_call(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`func` as a coroutine function run on one of the database threads."""
    return DatabaseSyncToAsync(func, thread_sensitive=False, executor=_executor)
