"""Reads for pages and sockets."""

import statistics
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from agents.models import (
    AgentRun,
    AnswerFeedback,
    BlackboardVersion,
    CoachingSession,
    Message,
    PromptVersion,
    Role,
    RunStatus,
    SessionEvent,
    Turn,
    TurnStatus,
)

FIRST_WORDS_CHARS = 80


def sessions_of(*, user_id: int) -> QuerySet[CoachingSession]:
    return CoachingSession.objects.filter(coachee_id=user_id).order_by("-created_at")


def session_overview(*, user_id: int) -> QuerySet[CoachingSession]:
    """Sessions with the first words the coachee wrote, in one query."""
    return with_first_words(sessions_of(user_id=user_id))


def with_first_words(sessions: QuerySet[CoachingSession]) -> QuerySet[CoachingSession]:
    """Each session with the first words its coachee wrote (what an untitled session is called)."""
    first_message = Message.objects.filter(session=OuterRef("pk"), role=Role.USER).order_by("seq").values("text")[:1]
    return sessions.annotate(first_words=Subquery(first_message))


def transcript(*, session_id: int) -> list[Message]:
    return list(Message.objects.filter(session_id=session_id).select_related("turn_as_synth").order_by("seq"))


def turn_number(via: str = "") -> Subquery:
    """A turn's number in its session (1, 2, 3 ...), counted as the session review counts them
    (by start, then id): what a person reads instead of a database id. `via`: the path from
    the annotated model to the turn ("source_turn__"), empty on Turn itself."""
    turn = via.removesuffix("__") if via else "pk"
    earlier = (
        Turn.objects.filter(session=OuterRef(f"{via}session"))
        .filter(
            Q(started_at__lt=OuterRef(f"{via}started_at"))
            | Q(started_at=OuterRef(f"{via}started_at"), pk__lte=OuterRef(turn))
        )
        .order_by()
        .values("session")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Subquery(earlier, output_field=IntegerField())


def with_feedback_counts(versions: QuerySet[PromptVersion]) -> QuerySet[PromptVersion]:
    """Prompt versions with thumbs_up and thumbs_down: coachees' ratings of the answers each wrote."""
    return versions.annotate(
        thumbs_up=Count("answer_feedback", filter=Q(answer_feedback__rating=AnswerFeedback.Rating.UP)),
        thumbs_down=Count("answer_feedback", filter=Q(answer_feedback__rating=AnswerFeedback.Rating.DOWN)),
    )


def feedback_of(*, session_id: int) -> dict[int, str]:
    """Full answer id -> "up" or "down", for the chat page's thumbs."""
    rows = AnswerFeedback.objects.filter(message__session_id=session_id).values_list("message_id", "rating")
    return {message_id: "up" if rating > 0 else "down" for message_id, rating in rows}


def running_turn_id(*, session_id: int) -> int | None:
    return Turn.objects.filter(session_id=session_id, status=TurnStatus.RUNNING).values_list("pk", flat=True).first()


def last_seq(*, session_id: int) -> int:
    event = SessionEvent.objects.filter(session_id=session_id).order_by("-seq").only("seq").first()
    return event.seq if event else 0


# The chat's estimate of the wait: the median of this server's recent whole turns, so it follows
# the engine and the load actually serving (minutes on a CPU, seconds on a GPU).
WAIT_SAMPLE_TURNS = 20
WAIT_WINDOW = timedelta(hours=6)


def usual_turn_seconds() -> int | None:
    """Median seconds from message to full answer over the last finished turns, if there are some."""
    since = timezone.now() - WAIT_WINDOW
    spans = Turn.objects.filter(status=TurnStatus.DONE, finished_at__gte=since).order_by("-finished_at")
    rows = spans.values_list("started_at", "finished_at")[:WAIT_SAMPLE_TURNS]
    took = [(finished - started).total_seconds() for started, finished in rows if finished is not None]
    return round(statistics.median(took)) if len(took) >= 3 else None


def latest_blackboard(*, coachee_id: int) -> BlackboardVersion | None:
    return BlackboardVersion.objects.filter(coachee_id=coachee_id).order_by("-version").first()


def blackboard_of(*, coachee_id: int) -> dict[str, Any] | None:
    latest = BlackboardVersion.objects.filter(coachee_id=coachee_id).order_by("-version").only("data").first()
    return latest.data if latest else None


def previous_output(*, coachee_id: int, agent: str, before: datetime) -> dict[str, Any] | None:
    """The parsed output of `agent`'s latest successful run for this coachee in a turn that
    started before `before` (a blocked-moves or profile carry-over from the previous turn)."""
    run = (
        AgentRun.objects.filter(
            agent=agent, status=RunStatus.SUCCEEDED, turn__session__coachee_id=coachee_id, turn__started_at__lt=before
        )
        .order_by("-turn__started_at")
        .only("parsed_output")
        .first()
    )
    return run.parsed_output if run and run.parsed_output else None
