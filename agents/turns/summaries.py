"""When a session's summary is written: in the session when the history no longer fits, at its
end, and again for a session whose summary task was lost. Queued by name through dispatch."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.core.cache import cache
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from agents.models import (
    CoachingSession,
    Message,
    SessionStatus,
    SessionSummary,
    SummaryScope,
    Turn,
)
from agents.turns import dispatch

logger = logging.getLogger(__name__)


def history_needs_compaction(dropped: dict[str, Any]) -> bool:
    return bool(dropped.get("history_messages"))


def in_session_until_seq(*, oldest_kept_seq: int, user_seq: int) -> int:
    """Summarise up to the middle of the history that still fits: the next turns then have
    room again, instead of a new summary at every turn."""
    return oldest_kept_seq + (user_seq - oldest_kept_seq) // 2


# The summary task's hard time limit (tasks.py). A lease on a session's summary lasts as long: one
# that a killed worker never released ends when its task would have been killed anyway.
SUMMARY_TIME_LIMIT_S = 960


def in_session_compaction_schedule(*, turn: Turn) -> None:
    """Queue a summary of the part of the history the turn's prefix had to drop, unless one is
    already being written for the session or this part has been tried.

    Every turn's prefix drops history until a verified summary covers it. Queued at each such
    turn, a summarizer slower than the coachee (the CPU build takes a minute or more) or one
    whose summaries fail their check wrote a summary at every turn, each for a part one turn
    longer: in the benchmark's 60-turn session on the simulator (whose summaries fail their
    check), 94 attempts for 47 parts; 18 for 9 with this."""
    oldest = turn.shared_dropped.get("oldest_kept_seq")
    if oldest is None or _part_tried(turn.session_id, oldest_kept_seq=int(oldest)):
        return
    until = in_session_until_seq(oldest_kept_seq=int(oldest), user_seq=turn.user_message.seq)
    session_id = turn.session_id

    def enqueue() -> None:
        if not cache.add(_lease_key(session_id, SummaryScope.IN_SESSION), until, timeout=SUMMARY_TIME_LIMIT_S):
            return
        try:
            dispatch.summary_write_queue(session_id, SummaryScope.IN_SESSION, until)
        except Exception:
            # Not queued (the broker refused it): no task will release the lease, and a later turn
            # tries again. Never raised: this runs on Coach's path, which a summary must not stop.
            logger.exception("could not queue the in-session summary of session %s", session_id)
            summary_lease_release(session_id=session_id, scope=SummaryScope.IN_SESSION)

    transaction.on_commit(enqueue)


def _part_tried(session_id: int, *, oldest_kept_seq: int) -> bool:
    """An attempt already covers the oldest message the prefix keeps: verified after this prefix
    was built (the next turn's uses it), or failed: another try waits until the history has moved
    past the part it covered."""
    return SessionSummary.objects.filter(
        session_id=session_id, scope=SummaryScope.IN_SESSION, covers_until_seq__gte=oldest_kept_seq
    ).exists()


def _lease_key(session_id: int, scope: str) -> str:
    return f"coaching:summary-running:{scope}:{session_id}"


def summary_lease_release(*, session_id: int, scope: str) -> None:
    """The summary task has ended (written, failed or refused): the next part may be queued."""
    cache.delete(_lease_key(session_id, scope))


def session_summary_schedule(*, session_id: int) -> None:
    def enqueue() -> None:
        dispatch.summary_write_queue(session_id, SummaryScope.SESSION, None)

    transaction.on_commit(enqueue)


def unsummarised_sessions_queue(*, older_than_minutes: int = 10, within_days: int = 7, limit: int = 50) -> list[int]:
    """Ended sessions that still have no summary attempt (a lost task): queue them again.

    Only sessions ended in the last `within_days`: a recovery for lost tasks, not a backfill
    of every session that ended before summaries existed (that is a one-off job)."""
    now = timezone.now()
    ids = list(
        CoachingSession.objects.filter(
            status=SessionStatus.ENDED,
            ended_at__lt=now - timedelta(minutes=older_than_minutes),
            ended_at__gte=now - timedelta(days=within_days),
        )
        .filter(Exists(Message.objects.filter(session=OuterRef("pk")).exclude(text="")))
        .exclude(Exists(SessionSummary.objects.filter(session=OuterRef("pk"), scope=SummaryScope.SESSION)))
        .values_list("pk", flat=True)[:limit]
    )
    for pk in ids:
        session_summary_schedule(session_id=pk)
    return ids
