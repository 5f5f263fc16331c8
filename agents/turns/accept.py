"""Accepting a coachee's message: the message, the turn and its first event in one transaction,
the crisis pre-gate inside it, then the turn's canvas queued on commit."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from agents import selectors
from agents.llm.control_tokens import carries_control_tokens
from agents.models import (
    AgentConfig,
    CoachingSession,
    Escalation,
    Message,
    MessageStatus,
    Role,
    SessionEvent,
    SessionStatus,
    Turn,
    TurnStatus,
)
from agents.observability import metrics
from agents.roles import turn_setup
from agents.safety import pregate, replies, steering
from agents.turns import crisis, dispatch, event_log, finish

logger = logging.getLogger(__name__)


# Why a turn whose message carried the chat template's control tokens is flagged for review.
CONTROL_TOKENS_REASON = "the message carried chat-template control tokens (neutralised before any model read them)"


class TurnRunningError(Exception):
    """A new message while the session's previous turn still runs: it would compete with that
    turn for the models (and for the coachee's attention), so it is refused, not started."""

    def __init__(self, turn_id: int) -> None:
        super().__init__(f"turn {turn_id} is still running")
        self.turn_id = turn_id


class SessionClosedError(Exception):
    """The session has ended; it takes no more messages."""


@dataclass(frozen=True)
class AcceptResult:
    turn_id: int
    message_id: int
    created: bool
    event: dict[str, Any]
    # The caller starts the Celery canvas (pipeline_start) now. False when the canvas waits for
    # Coach's whole reply (one shared single-slot endpoint) or the message was a re-send.
    pipeline_due: bool = False
    # The turn as committed, with its session, coachee and user message (read-only); None for
    # a re-send.
    turn: Turn | None = None


def turn_accept(
    *,
    session_id: int,
    user_id: int,
    client_id: str,
    text: str,
    one_turn_at_a_time: bool = False,
) -> AcceptResult:
    """Store the coachee's message and open a turn; a re-sent client_id changes nothing.
    `one_turn_at_a_time`: refuse (TurnRunningError) while a turn of the session runs; the chat
    socket asks for it, fixtures that build many turns do not."""
    with transaction.atomic():
        session = (
            CoachingSession.objects.select_for_update(of=("self",))
            .select_related("coachee")
            .filter(pk=session_id)
            .first()
        )
        if session is None or session.coachee_id != user_id:
            raise PermissionDenied("not your session")
        if session.status != SessionStatus.OPEN:
            raise SessionClosedError("this session has ended")
        existing = Message.objects.filter(session=session, client_id=client_id).select_related("turn_as_user").first()
        if existing is not None:
            original = SessionEvent.objects.get(session=session, seq=existing.seq)
            return AcceptResult(existing.turn_as_user.pk, existing.pk, created=False, event=original.payload)
        if one_turn_at_a_time:
            # Under the session's row lock: two tabs sending at once cannot both pass. A turn
            # the crisis pre-gate answered holds nothing back: someone in danger who writes
            # again is heard (and assessed) now, not after that turn's full answer.
            running = (
                Turn.objects.filter(session=session, status=TurnStatus.RUNNING)
                .exclude(escalation__in=[Escalation.REFER, Escalation.CRISIS], crisis_signal__isnull=False)
                .values_list("pk", flat=True)
            )
            if (running_id := running.first()) is not None:
                raise TurnRunningError(running_id)
        seq = event_log.next_seq(session.pk)
        setup = turn_setup.setup_load()
        message = Message.objects.create(session=session, seq=seq, role=Role.USER, text=text, client_id=client_id)
        canvas_after_coach = coach_shares_a_single_slot(setup.configs)
        probe = probe_reason(text)
        turn = Turn.objects.create(
            session=session,
            user_message=message,
            deadline_at=timezone.now() + timedelta(seconds=settings.COACHING_TURN_DEADLINE_S),
            context_blackboard=selectors.latest_blackboard(coachee_id=user_id),
            canvas_after_coach=canvas_after_coach,
            flagged=bool(probe),
            flag_reason=probe,
        )
        event = event_log.event_emit(
            session_id=session.pk,
            type="message.accepted",
            seq=seq,
            payload={"turn_id": turn.pk, "message_id": message.pk, "client_id": client_id, "text": text},
            wait_for_send=False,  # Coach's request, next, does not wait for this send
        )
        # Both layers, with the session's last few coachee messages (a question about means
        # weighs more after distress earlier on). Bounded work: see benchmarks/crisis_detector.py.
        signal = pregate.assess(text, setup.crisis_patterns, pregate.recent_coachee_texts(session.pk, before_seq=seq))
        if signal is not None:
            crisis_answer(turn=turn, signal=signal)
    # Committed: Coach, next on this thread, starts from these rows instead of reading them again.
    turn_setup.turn_remember(turn, setup=setup)
    return AcceptResult(turn.pk, message.pk, created=True, event=event, pipeline_due=not canvas_after_coach, turn=turn)


def probe_reason(text: str) -> str:
    """Why the coach should see this message as someone probing the models, or ""; a probe is
    counted once the turn commits. Nothing is blocked on it: what protects the coachee is the
    fences, the neutralised control tokens and the gates on every reply; this is so the people
    who run the chat see the attempt."""
    if carries_control_tokens(text):  # the models never see them as such (llm.control_tokens)
        transaction.on_commit(metrics.control_tokens_carried)
        return CONTROL_TOKENS_REASON
    if (hit := steering.assess(text)) is not None:
        transaction.on_commit(metrics.steering_flagged)
        return hit.reason()[:200]
    return ""


def pipeline_start(*, turn_id: int) -> None:
    """Queue the turn's Celery canvas (after turn_accept has committed the turn).

    When the broker cannot take it (Celery's publish already retried), the coachee gets the
    fallback reply now rather than at the deadline: the message is saved either way."""
    try:
        dispatch.turn_pipeline_start(turn_id)
    except Exception:
        logger.exception("could not queue the agents of turn %s", turn_id)
        finish.turn_fallback(
            turn_id=turn_id,
            reason="the turn's agents could not be queued",
            missing=["shadow", "persona", "plasticity", "stability", "synth"],
        )


def crisis_answer(*, turn: Turn, signal: pregate.CrisisSignal) -> None:
    """Crisis language: the resources card and a fixed calm reply now, no model involved.

    The reply takes Coach's place (Coach does not run); the canvas still runs, and Synth
    gets a crisis brief whatever Stability says (pipeline.brief.arbitration_for). Abuse without
    immediate danger is escalated to refer, with the domestic-violence lines first. Words that
    tell someone else's crisis get the same card and level, and a reply to the helper.
    """
    turn.escalation = signal.level
    turn.flagged = True
    turn.flag_reason = signal.reason()[:200]
    turn.crisis_signal = signal.record()
    transaction.on_commit(
        functools.partial(metrics.crisis_hit, layer=signal.layer, category=signal.category, level=signal.level)
    )
    crisis.safety_notice_emit(turn=turn, level=signal.level, category=signal.category, someone_else=signal.someone_else)
    seq = event_log.next_seq(turn.session_id)
    reply = replies.crisis_reply(turn.session.locale, signal.category, someone_else=signal.someone_else)
    message = Message.objects.create(session_id=turn.session_id, seq=seq, role=Role.COACH, text=reply)
    turn.coach_message = message
    turn.coach_done_at = timezone.now()
    turn.save(update_fields=["escalation", "flagged", "flag_reason", "crisis_signal", "coach_message", "coach_done_at"])
    event_log.event_emit(
        session_id=turn.session_id,
        type="coach.done",
        seq=seq,
        payload={"turn_id": turn.pk, "message_id": message.pk, "text": reply, "status": MessageStatus.COMPLETE},
    )


def coach_shares_a_single_slot(configs: dict[str, AgentConfig]) -> bool:
    """True when Coach and Shadow use one endpoint that serves one request at a time
    (the embedded llama.cpp server): then Coach goes first, or it would queue behind Shadow."""
    coach, shadow = configs.get("coach"), configs.get("shadow")
    return bool(
        coach
        and shadow
        and coach.enabled
        and coach.endpoint_id == shadow.endpoint_id
        and coach.endpoint.max_concurrency <= 1
    )


def turn_canvas_after_coach(*, turn_id: int) -> None:
    """Coach is done (or could not run): start the canvas if it was waiting for Coach."""
    if Turn.objects.filter(pk=turn_id, canvas_after_coach=True, status=TurnStatus.RUNNING).exists():
        transaction.on_commit(lambda: dispatch.turn_pipeline_start(turn_id))
