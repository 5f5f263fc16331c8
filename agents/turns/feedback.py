"""The coachee's thumbs up or down on a full answer.

Kept apart from accept and finish (the turn's hot path): nothing here runs during a turn.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction

from agents.models import Agent, AgentRun, AnswerFeedback, Message, Role, Turn

COMMENT_CHARS = 500  # AnswerFeedback.comment's length


def answer_feedback_set(
    *, user_id: int, message_id: int, rating: int | None, comment: str = ""
) -> AnswerFeedback | None:
    """Rate one full answer of the coachee's own (1 up, -1 down); None takes the rating back.
    The Synth prompt version that wrote the answer is kept with it, to count per version."""
    if rating is not None and rating not in AnswerFeedback.Rating.values:
        raise ValueError("A rating is up (1) or down (-1).")
    with transaction.atomic():
        message = (
            Message.objects.select_for_update()
            .filter(pk=message_id, role=Role.SYNTH, session__coachee_id=user_id)
            .first()
        )
        turn = Turn.objects.filter(synth_message_id=message_id).first() if message is not None else None
        if message is None or turn is None:
            raise PermissionDenied("not a full answer of yours")
        if rating is None:
            AnswerFeedback.objects.filter(message=message).delete()
            return None
        # The round that wrote the delivered text (the last one that ran); a fallback reply
        # counts against the version whose rounds failed.
        prompt_version_id = (
            AgentRun.objects.filter(turn=turn, agent=Agent.SYNTH)
            .order_by("-round")
            .values_list("prompt_version_id", flat=True)
            .first()
        )
        feedback, _ = AnswerFeedback.objects.update_or_create(
            message=message,
            defaults={
                "turn": turn,
                "rating": rating,
                "comment": comment.strip()[:COMMENT_CHARS],
                "prompt_version_id": prompt_version_id,
            },
        )
    return feedback
