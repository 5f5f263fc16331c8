"""Reads for pages and sockets."""

from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery

from agents.models import BlackboardVersion, CoachingSession, Message, Role, SessionEvent

FIRST_WORDS_CHARS = 80


def sessions_of(*, user_id: int) -> QuerySet[CoachingSession]:
    return CoachingSession.objects.filter(coachee_id=user_id).order_by("-created_at")


def session_overview(*, user_id: int) -> QuerySet[CoachingSession]:
    """Sessions with the first words the coachee wrote, in one query."""
    first_message = Message.objects.filter(session=OuterRef("pk"), role=Role.USER).order_by("seq").values("text")[:1]
    return sessions_of(user_id=user_id).annotate(first_words=Subquery(first_message))


def transcript(*, session_id: int) -> list[Message]:
    return list(Message.objects.filter(session_id=session_id).select_related("turn_as_synth").order_by("seq"))


def last_seq(*, session_id: int) -> int:
    event = SessionEvent.objects.filter(session_id=session_id).order_by("-seq").only("seq").first()
    return event.seq if event else 0


def blackboard_of(*, coachee_id: int) -> dict[str, Any] | None:
    latest = BlackboardVersion.objects.filter(coachee_id=coachee_id).order_by("-version").only("data").first()
    return latest.data if latest else None
