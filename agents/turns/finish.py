"""How a turn ends: the full answer stored and sent, the honest fallback, a degraded notice, the
watchdog's expiry, Stop, and a Coach stream whose process died."""

from __future__ import annotations

import functools
import logging
from datetime import timedelta
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from agents import rendering
from agents.llm import breaker
from agents.models import (
    AgentConfig,
    AgentRun,
    Message,
    MessageStatus,
    Role,
    RunStatus,
    SessionEvent,
    Turn,
    TurnStatus,
)
from agents.observability import hooks as observe
from agents.safety import pregate, quality
from agents.turns import event_log

logger = logging.getLogger(__name__)


# The honest short answer when the full answer cannot be given (Synth's reply failed the gate
# twice, the deadline passed, the agents could not be queued), in the coachee's language.
FALLBACK_REPLIES = {
    "en": (
        "I want to give you a careful, complete answer, and I could not put one together safely just now. "
        "Your message is saved and your coach can see it. If you like, send it again in a moment, "
        "or tell me more about what matters most to you right now."
    ),
    "de": (
        "Ich möchte dir eine sorgfältige, vollständige Antwort geben, und das ist mir gerade nicht sicher "
        "gelungen. Deine Nachricht ist gespeichert und dein Coach kann sie sehen. Wenn du magst, erzähl mir "
        "mehr darüber, was dir gerade am wichtigsten ist."
    ),
    "fr": (
        "Je veux te donner une réponse soignée et complète, et je n'ai pas pu en préparer une de façon sûre "
        "pour l'instant. Ton message est enregistré et ton coach peut le voir. Si tu veux, dis-m'en plus sur "
        "ce qui compte le plus pour toi en ce moment."
    ),
    "es": (
        "Quiero darte una respuesta cuidadosa y completa, y ahora mismo no he podido prepararla de forma "
        "segura. Tu mensaje está guardado y tu coach puede verlo. Si quieres, cuéntame más sobre lo que más "
        "te importa ahora."
    ),
    "pt": (
        "Quero te dar uma resposta cuidadosa e completa, e agora não consegui prepará-la com segurança. "
        "Sua mensagem está salva e seu coach pode vê-la. Se quiser, conte-me mais sobre o que mais importa "
        "para você agora."
    ),
    "ru": (
        "Я хочу дать вам внимательный и полный ответ, но сейчас не смог подготовить его надёжно. "
        "Ваше сообщение сохранено, и ваш коуч его видит. Если хотите, расскажите, что для вас сейчас "
        "важнее всего."
    ),
}


FALLBACK_REPLY = FALLBACK_REPLIES["en"]


def fallback_reply(languages: frozenset[str]) -> str:
    return FALLBACK_REPLIES.get(next(iter(languages), "en"), FALLBACK_REPLY)


def turn_fallback(*, turn_id: int, reason: str, missing: list[str]) -> bool:
    """End the turn now with the fallback reply in the coachee's language, flagged with `reason`
    (queuing failed, the deadline passed, Synth crashed). False when it had already ended."""
    texts: list[str] = []
    message = Message.objects.filter(turn_as_user__pk=turn_id).values("text", "session_id", "seq").first()
    if message is not None:
        earlier = pregate.recent_coachee_texts(message["session_id"], before_seq=message["seq"])
        texts = [message["text"], *earlier]
    reply = fallback_reply(quality.coachee_languages(texts))
    return turn_finish(turn_id=turn_id, reply=reply, fallback=True, degraded=True, flag_reason=reason, missing=missing)


def streaming_coach_messages(*, session_id: int) -> list[Message]:
    """Coach replies still being written (their text so far), for a client that resumes."""
    return list(
        Message.objects.filter(session_id=session_id, role=Role.COACH, status=MessageStatus.STREAMING).select_related(
            "turn_as_coach"
        )
    )


DEGRADED_TEXT = (
    "Some parts of the coaching system are unavailable right now. Your message is saved, "
    "and you will get a shorter answer than usual."
)


def degraded_notice_emit(*, turn_id: int, reason: str) -> bool:
    """Tell the coachee, once per turn, that this answer will be shorter. False if already told
    (or the turn has ended: then turn.done says it all)."""
    with transaction.atomic():
        turn = Turn.objects.select_for_update().filter(pk=turn_id).first()
        if turn is None or turn.status != TurnStatus.RUNNING:
            return False
        told = SessionEvent.objects.filter(
            session_id=turn.session_id, type="service.degraded", payload__turn_id=turn_id
        ).exists()
        if told:
            return False
        event_log.event_emit(
            session_id=turn.session_id,
            type="service.degraded",
            payload={"turn_id": turn_id, "reason": reason, "text": DEGRADED_TEXT},
        )
    return True


def degraded_notice_if_open(*, turn_id: int, agents: list[str] | None = None) -> bool:
    """The notice, if the endpoint of any of these agents (default: all enabled) is failing fast."""
    configs = AgentConfig.objects.filter(enabled=True).select_related("endpoint")
    if agents is not None:
        configs = configs.filter(agent__in=agents)
    if not breaker.open_endpoints([c.endpoint.name for c in configs]):
        return False
    return degraded_notice_emit(turn_id=turn_id, reason="endpoint_unavailable")


def turn_finish(
    *,
    turn_id: int,
    reply: str,
    fallback: bool,
    degraded: bool,
    flag_reason: str = "",
    missing: list[str] | None = None,
    critic_result: dict[str, Any] | None = None,
) -> bool:
    """Deliver the turn's final message, once. False when the turn had already ended.
    `critic_result`: the critic gate's rounds, stored with the delivery (one transaction)."""
    with transaction.atomic():
        turn = Turn.objects.select_for_update().filter(pk=turn_id).first()
        if turn is None or turn.status != TurnStatus.RUNNING:
            return False
        seq = event_log.next_seq(turn.session_id)
        message = Message.objects.create(session_id=turn.session_id, seq=seq, role=Role.SYNTH, text=reply)
        turn.synth_message = message
        turn.status = TurnStatus.DONE
        turn.degraded = degraded or fallback
        if flag_reason:
            turn.flagged = True
            turn.flag_reason = flag_reason[:200]
        turn.finished_at = timezone.now()
        fields = ["synth_message", "status", "degraded", "flagged", "flag_reason", "finished_at"]
        if critic_result:
            turn.critic_result = critic_result
            fields.append("critic_result")
        turn.save(update_fields=fields)
        event_log.event_emit(
            session_id=turn.session_id,
            type="synth.done",
            seq=seq,
            payload={
                "turn_id": turn.pk,
                "message_id": message.pk,
                "completes_message_id": turn.coach_message_id,
                "text": reply,
                "html": rendering.markdown_to_safe_html(reply),
                "fallback": fallback,
            },
        )
        event_log.event_emit(
            session_id=turn.session_id,
            type="turn.done",
            payload={
                "turn_id": turn.pk,
                "status": turn.status,
                "degraded": turn.degraded,
                "flagged": turn.flagged,
                "missing": missing or [],
            },
        )
    transaction.on_commit(functools.partial(observe.turn_finished, turn=turn, fallback=fallback))
    return True


def turn_expire(*, turn_id: int) -> bool:
    """The watchdog: a turn past its deadline gets the fallback reply and a flag."""
    coach_interrupted_close(turn_id=turn_id)
    turn = Turn.objects.filter(pk=turn_id, status=TurnStatus.RUNNING).first()
    if turn is None or timezone.now() < turn.deadline_at:
        return False
    unfinished = list(
        AgentRun.objects.filter(turn=turn, status=RunStatus.RUNNING).values_list("agent", flat=True).distinct()
    )
    logger.warning("turn %s passed its deadline; unfinished agents: %s", turn_id, unfinished)
    return turn_fallback(turn_id=turn_id, reason="deadline passed", missing=unfinished)


# The sweeper acts this long after a deadline: the watchdogs (Celery's and Daphne's) come first.
OVERDUE_GRACE_S = 10.0


def overdue_turns_expire(*, limit: int = 200) -> int:
    """End every turn still running well past its deadline: what the watchdogs leave behind
    when the process holding them died (Celery beat runs this every 30 s)."""
    cutoff = timezone.now() - timedelta(seconds=OVERDUE_GRACE_S)
    overdue = Turn.objects.filter(status=TurnStatus.RUNNING, deadline_at__lt=cutoff).order_by("deadline_at")
    return sum(turn_expire(turn_id=turn_id) for turn_id in overdue.values_list("pk", flat=True)[:limit])


INTERRUPTED_COACH_ERROR = "interrupted: the process streaming it stopped"


def coach_interrupted_close(*, turn_id: int) -> bool:
    """A Coach reply still 'streaming' after the turn's deadline lost its stream (the Daphne
    process running it died: its stream is bounded by the deadline otherwise). Close it as
    failed, keeping the text saved so far, so no client shows it streaming for ever."""
    turn = Turn.objects.filter(pk=turn_id, deadline_at__lte=timezone.now()).first()
    if turn is None or turn.coach_message_id is None:
        return False
    with transaction.atomic():
        # Conditional: whichever of this and Coach's own ending comes first wins, once.
        closed = Message.objects.filter(pk=turn.coach_message_id, status=MessageStatus.STREAMING).update(
            status=MessageStatus.FAILED, updated_at=timezone.now()
        )
        if not closed:
            return False
        message = Message.objects.get(pk=turn.coach_message_id)
        AgentRun.objects.filter(turn=turn, agent="coach", status=RunStatus.RUNNING).update(
            status=RunStatus.FAILED, error=INTERRUPTED_COACH_ERROR, finished_at=timezone.now()
        )
        Turn.objects.filter(pk=turn_id, coach_done_at__isnull=True).update(coach_done_at=timezone.now())
        event_log.event_emit(
            session_id=turn.session_id,
            type="coach.done",
            payload={"turn_id": turn_id, "message_id": message.pk, "text": message.text, "status": message.status},
        )
    logger.warning("turn %s: Coach's stream was interrupted; its reply is closed as failed", turn_id)
    return True


def turn_stop(*, turn_id: int, user_id: int) -> bool:
    """The coachee pressed Stop: the turn ends now and nothing more is delivered for it."""
    with transaction.atomic():
        turn = Turn.objects.select_for_update().select_related("session").filter(pk=turn_id).first()
        if turn is None or turn.session.coachee_id != user_id:
            raise PermissionDenied("not your turn")
        if turn.status != TurnStatus.RUNNING:
            return False
        turn.status = TurnStatus.STOPPED
        turn.finished_at = timezone.now()
        turn.save(update_fields=["status", "finished_at"])
        event_log.event_emit(
            session_id=turn.session_id,
            type="turn.done",
            payload={"turn_id": turn.pk, "status": turn.status, "degraded": False, "flagged": False, "missing": []},
        )
    return True


def running_turn_ids(*, session_id: int) -> list[int]:
    return list(Turn.objects.filter(session_id=session_id, status=TurnStatus.RUNNING).values_list("pk", flat=True))
