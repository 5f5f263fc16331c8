"""What waits for a coach: the review queue (turns that need a look, found by themselves, and
summaries that failed their check) and the inbox of what is new since the coach last looked.
The querysets handed in are already scoped to the coach (agents/admin/scoping.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet
from django.utils import timezone

from agents.models import Annotation, AnswerFeedback, Escalation, QualityFinding, Turn
from agents.review.decisions import check_reasons
from agents.review.labels import AGENT_LABELS, excerpt
from agents.selectors import turn_number

QUEUE_REASONS = {
    "escalated": "Escalated",
    "checks": "Failed a check",
    "feedback": "Thumbs down",
    "degraded": "Degraded",
    "flagged": "Flagged",
}


def review_queue(turns: QuerySet[Turn], reason: str | None = None) -> QuerySet[Turn]:
    """Turns a coach should look at, found by themselves: escalated; failed a quality check or
    the critic gate (in any round, even when the retry passed); a thumbs-down from the coachee;
    degraded; flagged by the pipeline or a coach. Oldest first. `turns` must already be scoped
    to what the coach may see."""
    coach_flagged = Exists(Annotation.objects.filter(turn=OuterRef("pk"), flagged=True))
    quality_failed = Exists(QualityFinding.objects.filter(turn=OuterRef("pk")))
    thumbs_down = Exists(AnswerFeedback.objects.filter(turn=OuterRef("pk"), rating=AnswerFeedback.Rating.DOWN))
    conditions = {
        "escalated": ~Q(escalation=Escalation.NONE),
        "checks": Q(quality_failed=True)
        | Q(critic_result__round_1__passed=False)
        | Q(critic_result__round_2__passed=False),
        "feedback": Q(thumbs_down=True),
        "degraded": Q(degraded=True),
        "flagged": Q(flagged=True) | Q(coach_flagged=True),
    }
    if reason in conditions:
        condition = conditions[reason]
    else:
        condition = Q()
        for each in conditions.values():
            condition |= each
    return (
        turns.annotate(
            coach_flagged=coach_flagged,
            quality_failed=quality_failed,
            thumbs_down=thumbs_down,
            annotation_count=Count("annotations", distinct=True),
            number=turn_number(),
        )
        .filter(condition)
        .select_related("session__coachee", "user_message")
        .prefetch_related(
            Prefetch("quality_findings", queryset=QualityFinding.objects.order_by("round", "pk")),
            Prefetch("feedback", queryset=AnswerFeedback.objects.filter(rating=AnswerFeedback.Rating.DOWN)),
        )
        .order_by("started_at", "pk")
    )


@dataclass
class QueueRow:
    turn: Turn
    reasons: list[tuple[str, str]]
    first_words: str
    annotation_count: int
    waiting: timedelta


def queue_rows(turns: Iterable[Turn]) -> list[QueueRow]:
    now = timezone.now()
    rows = []
    for turn in turns:
        reasons: list[tuple[str, str]] = []
        if turn.escalation != Escalation.NONE:
            reasons.append((f"escalation-{turn.escalation}", f"Escalation: {turn.get_escalation_display()}"))
        if turn.degraded:
            missing = (turn.brief or {}).get("missing") if isinstance(turn.brief, dict) else None
            label = "Degraded" + (f": {', '.join(AGENT_LABELS.get(m, m) for m in missing)} missing" if missing else "")
            reasons.append(("degraded", label))
        if turn.flagged:
            reasons.append(("flagged", f"Flagged: {turn.flag_reason}" if turn.flag_reason else "Flagged"))
        if getattr(turn, "coach_flagged", False):
            reasons.append(("coach-flagged", "Flagged by a coach"))
        reasons += [("check-failed", label) for label in check_reasons(turn)]
        for feedback in turn.feedback.all():
            said = f": “{feedback.comment}”" if feedback.comment else ""
            reasons.append(("thumbs-down", f"Thumbs down from the coachee{said}"))
        rows.append(
            QueueRow(
                turn=turn,
                reasons=reasons,
                first_words=excerpt(turn.user_message.text, 120),
                annotation_count=int(getattr(turn, "annotation_count", 0) or 0),
                waiting=now - turn.started_at,
            )
        )
    return rows


def flagged_summaries(coachee_ids: Any, limit: int = 50) -> list[Any]:
    """Summaries that failed every strategy, for the review queue (newest first)."""
    from agents.models import SessionSummary as StoredSummary
    from agents.models import SummaryStatus

    return list(
        StoredSummary.objects.filter(status=SummaryStatus.FLAGGED, session__coachee__in=coachee_ids)
        .select_related("session__coachee")
        .order_by("-created_at")[:limit]
    )


# A coach who never marked their inbox sees the last week as new.
INBOX_FIRST_LOOK = timedelta(days=7)


@dataclass
class InboxRow:
    coachee: Any
    new_turns: int
    new_in_queue: int  # of those, turns the review queue lists (a failed check, a thumbs-down ...)
    new_escalations: int  # of those, refer or crisis
    latest: datetime


@dataclass
class Inbox:
    since: datetime
    rows: list[InboxRow]

    @property
    def empty(self) -> bool:
        return not self.rows


def inbox(turns: QuerySet[Turn], queue: QuerySet[Turn], seen_at: datetime | None) -> Inbox:
    """Per coachee, the turns started since `seen_at` among `turns` (already scoped to the coach),
    how many of them the review queue lists and how many escalated; most recent coachee first."""
    since = seen_at or timezone.now() - INBOX_FIRST_LOOK
    new = turns.filter(started_at__gt=since)
    queued = set(queue.filter(started_at__gt=since).values_list("pk", flat=True))
    rows: dict[int, InboxRow] = {}
    for turn in new.select_related("session__coachee").order_by("-started_at", "-pk"):
        coachee = turn.session.coachee
        row = rows.setdefault(coachee.pk, InboxRow(coachee, 0, 0, 0, turn.started_at))
        row.new_turns += 1
        row.new_in_queue += turn.pk in queued
        row.new_escalations += turn.escalation in (Escalation.REFER, Escalation.CRISIS)
    return Inbox(since, list(rows.values()))
