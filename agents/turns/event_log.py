"""The session's event log: every event that matters after a reconnect is stored with the
session's next sequence number in the transaction of the change it reports, and sent to the
session's channel-layer group only after that transaction commits."""

from __future__ import annotations

import logging
from typing import Any

from django.db import connection, transaction

from agents.models import (
    CoachingSession,
    SessionEvent,
)
from agents.turns import layer

logger = logging.getLogger(__name__)


def session_group(session_id: int) -> str:
    return f"coaching-session-{session_id}"


def user_group(user_id: int) -> str:
    return f"coaching-user-{user_id}"


# Close codes the chat page understands: 4000 asks it to reconnect (and resume), 4001 means
# the user logged out or changed password (go to the login page), 4401/4403 are refusals.
CLOSE_RECONNECT = 4000


CLOSE_LOGGED_OUT = 4001


def _close_group(group: str, code: int) -> None:
    layer.group_send_sync(group, {"type": "connection.close", "code": code})


def session_sockets_close(*, session_id: int, code: int = CLOSE_RECONNECT) -> None:
    """Close every socket open on a session (they reconnect and resume by themselves)."""
    _close_group(session_group(session_id), code)


def user_sockets_close(*, user_id: int, code: int = CLOSE_LOGGED_OUT) -> None:
    """Close every socket of a user: after logout or a password change."""
    _close_group(user_group(user_id), code)


def group_send_soon(session_id: int, event: dict[str, Any]) -> None:
    layer.group_send_soon(session_group(session_id), {"type": event["type"], "event": event})


def group_send_now(session_id: int, event: dict[str, Any]) -> None:
    try:
        layer.group_send_sync(session_group(session_id), {"type": event["type"], "event": event})
    except Exception:
        # The event is persisted; a client that missed it gets it on resume.
        logger.exception("channel layer send failed for session %s (%s)", session_id, event["type"])


def next_seq(session_id: int) -> int:
    """The session's next sequence number (call inside the transaction that uses it): one
    UPDATE ... RETURNING, whose row lock serialises the session's writers."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {CoachingSession._meta.db_table} SET last_seq = last_seq + 1 WHERE id = %s RETURNING last_seq",
            [session_id],
        )
        row = cursor.fetchone()
    if row is None:
        raise CoachingSession.DoesNotExist(session_id)
    return int(row[0])


def event_emit(
    *, session_id: int, type: str, payload: dict[str, Any], seq: int | None = None, wait_for_send: bool = True
) -> dict[str, Any]:
    """Persist an event with the next seq (or the given one) and send it after commit.
    `wait_for_send=False`: the committing thread goes on while it is sent (clients apply seq'd
    events in seq order whatever order they arrive in)."""
    # No savepoint inside a caller's transaction: an error aborts that transaction anyway.
    with transaction.atomic(savepoint=False):
        if seq is None:
            seq = next_seq(session_id)
        event = {"type": type, "seq": seq, **payload}
        SessionEvent.objects.create(session_id=session_id, seq=seq, type=type, payload=event)
        send = group_send_now if wait_for_send else group_send_soon
        transaction.on_commit(lambda: send(session_id, event))
    return event


# Replay page size: a client far behind gets its events in pages, not one huge query.
REPLAY_PAGE = 500


def events_after(*, session_id: int, after_seq: int, limit: int = REPLAY_PAGE) -> list[dict[str, Any]]:
    return list(
        SessionEvent.objects.filter(session_id=session_id, seq__gt=after_seq)
        .order_by("seq")
        .values_list("payload", flat=True)[:limit]
    )
