"""Sessions and turns as CSV rows for coaches' exports, with cells no spreadsheet runs as formulas."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.db.models import Count, Q, QuerySet

from agents.models import CoachingSession, Escalation, Turn
from agents.review.decisions import critic_rounds
from agents.review.session import crisis_signal_text


def _csv_cell(value: Any) -> str:
    """A cell no spreadsheet will run as a formula (coachee text is untrusted)."""
    if value is None:
        return ""
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


SESSION_EXPORT_HEADER = [
    "session",
    "coachee",
    "status",
    "locale",
    "created_at",
    "ended_at",
    "turns",
    "escalated_turns",
    "degraded_turns",
    "flagged_turns",
]
TURN_EXPORT_HEADER = [
    "turn",
    "session",
    "coachee",
    "started_at",
    "finished_at",
    "status",
    "escalation",
    "degraded",
    "flagged",
    "flag_reason",
    "critic_passed",
    # The crisis pre-gate's card and why it fired; a card or escalation a coach found a false
    # alarm, by whom, when and why: with the turn list's filter, the false alarms of real use.
    "crisis_signal",
    "false_alarm_by",
    "false_alarm_at",
    "false_alarm_note",
    "coachee_message",
    "coach_reply",
    "full_answer",
]


def session_export_rows(sessions: QuerySet[CoachingSession]) -> Iterator[list[str]]:
    yield SESSION_EXPORT_HEADER
    annotated = (
        sessions.select_related("coachee")
        .annotate(
            n_turns=Count("turns", distinct=True),
            n_escalated=Count("turns", filter=~Q(turns__escalation=Escalation.NONE), distinct=True),
            n_degraded=Count("turns", filter=Q(turns__degraded=True), distinct=True),
            n_flagged=Count("turns", filter=Q(turns__flagged=True), distinct=True),
        )
        .order_by("created_at", "pk")
    )
    for s in annotated:
        values = [
            s.pk,
            s.coachee.get_username(),
            s.status,
            s.locale,
            s.created_at,
            s.ended_at,
            getattr(s, "n_turns", 0),
            getattr(s, "n_escalated", 0),
            getattr(s, "n_degraded", 0),
            getattr(s, "n_flagged", 0),
        ]
        yield [_csv_cell(v) for v in values]


def turn_export_rows(turns: QuerySet[Turn]) -> Iterator[list[str]]:
    yield TURN_EXPORT_HEADER
    selected = turns.select_related(
        "session__coachee", "user_message", "coach_message", "synth_message", "crisis_dismissed_by"
    ).order_by("started_at", "pk")
    for t in selected:
        rounds = critic_rounds(t.critic_result)
        values = [
            t.pk,
            t.session_id,
            t.session.coachee.get_username(),
            t.started_at,
            t.finished_at,
            t.status,
            t.escalation,
            t.degraded,
            t.flagged,
            t.flag_reason,
            "" if not rounds else rounds[-1].passed,
            crisis_signal_text(t.crisis_signal),
            t.crisis_dismissed_by.get_username() if t.crisis_dismissed_by else "",
            t.crisis_dismissed_at,
            t.crisis_dismissal_note,
            t.user_message.text,
            t.coach_message.text if t.coach_message else "",
            t.synth_message.text if t.synth_message else "",
        ]
        yield [_csv_cell(v) for v in values]
