"""Reads for pages and sockets."""

from django.db.models import QuerySet

from agents.models import CoachingSession, Message, SessionEvent


def sessions_of(*, user_id: int) -> QuerySet[CoachingSession]:
    return CoachingSession.objects.filter(coachee_id=user_id).order_by("-created_at")


def transcript(*, session_id: int) -> list[Message]:
    return list(Message.objects.filter(session_id=session_id).select_related("turn_as_synth").order_by("seq"))


def last_seq(*, session_id: int) -> int:
    event = SessionEvent.objects.filter(session_id=session_id).order_by("-seq").only("seq").first()
    return event.seq if event else 0
