"""Writes: accepting messages, the turn's lifecycle, and the persisted event log.

Every event that matters after a reconnect is stored with the session's next sequence
number inside the same transaction as the change it reports, and sent to the session's
channel-layer group only after that transaction commits.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.core.mail import send_mail
from django.db import connection, transaction
from django.db.models import Max
from django.urls import reverse
from django.utils import timezone
from django.utils.translation.trans_real import parse_accept_lang_header

from agents import (
    blackboard,
    compaction,
    dispatch,
    layer,
    quality,
    rendering,
    safety,
    selectors,
    turn_cache,
)
from agents.llm import breaker
from agents.models import (
    AccountSettings,
    AgentConfig,
    AgentRun,
    BlackboardVersion,
    CoachAssignment,
    CoachingSession,
    CrisisCategory,
    CrisisResource,
    Escalation,
    Message,
    MessageStatus,
    ResourceKind,
    Role,
    RunStatus,
    SessionEvent,
    SessionStatus,
    Turn,
    TurnStatus,
)
from agents.observability import hooks as observe
from agents.observability import metrics

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


class TurnRunningError(Exception):
    """A new message while the session's previous turn still runs: it would compete with that
    turn for the models (and for the coachee's attention), so it is refused, not started."""

    def __init__(self, turn_id: int) -> None:
        super().__init__(f"turn {turn_id} is still running")
        self.turn_id = turn_id


class SessionClosedError(Exception):
    """The session has ended; it takes no more messages."""


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


def session_for_user(*, session_id: int, user_id: int) -> CoachingSession:
    session = CoachingSession.objects.filter(pk=session_id).first()
    if session is None or session.coachee_id != user_id:
        raise PermissionDenied("not your session")
    return session


def session_start(*, user_id: int, locale: str = "en") -> CoachingSession:
    return CoachingSession.objects.create(coachee_id=user_id, locale=locale)


# The languages every safety layer speaks (patterns, classifier, replies, card, resources).
LANGUAGES = {"en": "English", "ru": "Русский", "de": "Deutsch", "pt": "Português", "fr": "Français", "es": "Español"}
UNKNOWN_LOCALE = "intl"  # no language known: English replies, the international resources


def canonical_locale(code: str) -> str:
    """'pt-br' → 'pt-BR', 'DE' → 'de'; what session locales and resources are keyed by."""
    language, _, region = code.strip().replace("_", "-").partition("-")
    return f"{language.lower()}-{region.upper()}" if region else language.lower()


def preferred_locale(*, user_id: int, accept_language: str = "") -> str:
    """The coachee's locale: their account setting, else the first language of the browser's
    Accept-Language the product speaks, else the first one it names (its resources fall back
    to the international ones), else UNKNOWN_LOCALE."""
    chosen = AccountSettings.objects.filter(user_id=user_id).values_list("locale", flat=True).first()
    if chosen:
        return chosen
    named = [canonical_locale(code) for code, _ in parse_accept_lang_header(accept_language[:500]) if code != "*"]
    for code in named:
        if code.split("-")[0] in LANGUAGES:
            return code
    return named[0][:16] if named else UNKNOWN_LOCALE


def account_locale_set(*, user_id: int, locale: str) -> None:
    """The coachee's chosen language ('' = the browser's); sessions started later use it."""
    if locale and locale not in LANGUAGES:
        raise ValueError(f"unsupported locale {locale!r}")
    AccountSettings.objects.update_or_create(user_id=user_id, defaults={"locale": locale})


@dataclass(frozen=True)
class AcceptResult:
    turn_id: int
    message_id: int
    created: bool
    event: dict[str, Any]
    # The caller starts the Celery canvas (pipeline_start) now. False when the canvas waits for
    # Coach's whole reply (one shared single-slot endpoint) or the message was a re-send.
    pipeline_due: bool = False


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
        seq = next_seq(session.pk)
        setup = turn_cache.setup_load()
        message = Message.objects.create(session=session, seq=seq, role=Role.USER, text=text, client_id=client_id)
        canvas_after_coach = coach_shares_a_single_slot(setup.configs)
        turn = Turn.objects.create(
            session=session,
            user_message=message,
            deadline_at=timezone.now() + timedelta(seconds=settings.COACHING_TURN_DEADLINE_S),
            context_blackboard=selectors.latest_blackboard(coachee_id=user_id),
            canvas_after_coach=canvas_after_coach,
        )
        event = event_emit(
            session_id=session.pk,
            type="message.accepted",
            seq=seq,
            payload={"turn_id": turn.pk, "message_id": message.pk, "client_id": client_id, "text": text},
            wait_for_send=False,  # Coach's request, next, does not wait for this send
        )
        # Both layers, with the session's last few coachee messages (a question about means
        # weighs more after distress earlier on). Bounded work: see benchmarks/crisis_detector.py.
        signal = safety.assess(text, setup.crisis_patterns, safety.recent_coachee_texts(session.pk, before_seq=seq))
        if signal is not None:
            crisis_answer(turn=turn, signal=signal)
    # Committed: Coach, next on this thread, starts from these rows instead of reading them again.
    turn_cache.turn_remember(turn, setup=setup)
    return AcceptResult(turn.pk, message.pk, created=True, event=event, pipeline_due=not canvas_after_coach)


def pipeline_start(*, turn_id: int) -> None:
    """Queue the turn's Celery canvas (after turn_accept has committed the turn).

    When the broker cannot take it (Celery's publish already retried), the coachee gets the
    fallback reply now rather than at the deadline: the message is saved either way."""
    try:
        dispatch.turn_pipeline_start(turn_id)
    except Exception:
        logger.exception("could not queue the agents of turn %s", turn_id)
        turn_fallback(
            turn_id=turn_id,
            reason="the turn's agents could not be queued",
            missing=["shadow", "persona", "plasticity", "stability", "synth"],
        )


def turn_fallback(*, turn_id: int, reason: str, missing: list[str]) -> bool:
    """End the turn now with the fallback reply in the coachee's language, flagged with `reason`
    (queuing failed, the deadline passed, Synth crashed). False when it had already ended."""
    texts: list[str] = []
    message = Message.objects.filter(turn_as_user__pk=turn_id).values("text", "session_id", "seq").first()
    if message is not None:
        earlier = safety.recent_coachee_texts(message["session_id"], before_seq=message["seq"])
        texts = [message["text"], *earlier]
    reply = fallback_reply(quality.coachee_languages(texts))
    return turn_finish(turn_id=turn_id, reply=reply, fallback=True, degraded=True, flag_reason=reason, missing=missing)


def crisis_answer(*, turn: Turn, signal: safety.CrisisSignal) -> None:
    """Crisis language: the resources card and a fixed calm reply now, no model involved.

    The reply takes Coach's place (Coach does not run); the canvas still runs, and Synth
    gets a crisis brief whatever Stability says (pipeline.arbitration_for). Abuse without
    immediate danger is escalated to refer, with the domestic-violence lines first.
    """
    turn.escalation = signal.level
    turn.flagged = True
    turn.flag_reason = signal.reason()[:200]
    turn.crisis_signal = signal.record()
    transaction.on_commit(
        functools.partial(metrics.crisis_hit, layer=signal.layer, category=signal.category, level=signal.level)
    )
    safety_notice_emit(turn=turn, level=signal.level, category=signal.category)
    seq = next_seq(turn.session_id)
    reply = safety.crisis_reply(turn.session.locale, signal.category)
    message = Message.objects.create(session_id=turn.session_id, seq=seq, role=Role.COACH, text=reply)
    turn.coach_message = message
    turn.coach_done_at = timezone.now()
    turn.save(update_fields=["escalation", "flagged", "flag_reason", "crisis_signal", "coach_message", "coach_done_at"])
    event_emit(
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


# Replay page size: a client far behind gets its events in pages, not one huge query.
REPLAY_PAGE = 500


def events_after(*, session_id: int, after_seq: int, limit: int = REPLAY_PAGE) -> list[dict[str, Any]]:
    return list(
        SessionEvent.objects.filter(session_id=session_id, seq__gt=after_seq)
        .order_by("seq")
        .values_list("payload", flat=True)[:limit]
    )


def streaming_coach_messages(*, session_id: int) -> list[Message]:
    """Coach replies still being written (their text so far), for a client that resumes."""
    return list(
        Message.objects.filter(session_id=session_id, role=Role.COACH, status=MessageStatus.STREAMING).select_related(
            "turn_as_coach"
        )
    )


def agent_status_emit(*, turn: Turn, agent: str, state: str, ms: int | None = None) -> None:
    """Live progress of one agent. Not persisted and without a seq: it is a view of the turn's
    AgentRun rows, which a resuming client gets as a snapshot (agent_statuses); persisting it
    cost a locked, durable transaction per event on the turn's critical path."""
    group_send_soon(turn.session_id, agent_status_event(turn_id=turn.pk, agent=agent, state=state, ms=ms))
    if state == "failed":
        degraded_notice_if_open(turn_id=turn.pk, agents=[agent])


def agent_status_event(*, turn_id: int, agent: str, state: str, ms: int | None) -> dict[str, Any]:
    return {"type": "agent.status", "turn_id": turn_id, "agent": agent, "state": state, "ms": ms}


RUN_STATES: dict[str, str] = {
    RunStatus.RUNNING: "started",
    RunStatus.SUCCEEDED: "succeeded",
    RunStatus.FAILED: "failed",
}


def agent_statuses(*, session_id: int) -> list[dict[str, Any]]:
    """The agent.status events of the session's running turns as they stand now (for resume)."""
    runs = (
        AgentRun.objects.filter(turn__session_id=session_id, turn__status=TurnStatus.RUNNING)
        .exclude(agent="coach")
        .order_by("turn_id", "started_at")
        .values_list("turn_id", "agent", "status", "latency_ms")
    )
    return [
        agent_status_event(turn_id=turn_id, agent=agent, state=RUN_STATES.get(status, "started"), ms=ms)
        for turn_id, agent, status, ms in runs
    ]


# --- Degraded mode: the coachee is told when model endpoints are failing ---------------------

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
        event_emit(
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
        seq = next_seq(turn.session_id)
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
        event_emit(
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
        event_emit(
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
        event_emit(
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
        event_emit(
            session_id=turn.session_id,
            type="turn.done",
            payload={"turn_id": turn.pk, "status": turn.status, "degraded": False, "flagged": False, "missing": []},
        )
    return True


def running_turn_ids(*, session_id: int) -> list[int]:
    return list(Turn.objects.filter(session_id=session_id, status=TurnStatus.RUNNING).values_list("pk", flat=True))


def session_end(*, session_id: int, user_id: int) -> bool:
    """The coachee ends a session: it takes no more messages; open tabs are told."""
    with transaction.atomic():
        session = CoachingSession.objects.select_for_update().filter(pk=session_id, coachee_id=user_id).first()
        if session is None:
            raise PermissionDenied("not your session")
        if session.status == SessionStatus.ENDED:
            return False
        session.status = SessionStatus.ENDED
        session.ended_at = timezone.now()
        session.save(update_fields=["status", "ended_at"])
        event_emit(session_id=session.pk, type="session.ended", payload={})
        compaction.session_summary_schedule(session_id=session.pk)
    return True


def idle_sessions_end(*, idle_minutes: int, limit: int = 100) -> list[int]:
    """End open sessions nobody has written in for `idle_minutes`; their summaries are queued."""
    cutoff = timezone.now() - timedelta(minutes=idle_minutes)
    ids = list(
        CoachingSession.objects.filter(status=SessionStatus.OPEN)
        .annotate(last_message_at=Max("messages__created_at"))
        .filter(last_message_at__lt=cutoff)
        .values_list("pk", flat=True)[:limit]
    )
    return [pk for pk in ids if session_end_idle(session_id=pk, cutoff=cutoff)]


def session_end_idle(*, session_id: int, cutoff: Any) -> bool:
    """End a session nobody wrote in since `cutoff` (Celery beat); its summary is queued."""
    with transaction.atomic():
        session = CoachingSession.objects.select_for_update().filter(pk=session_id, status=SessionStatus.OPEN).first()
        if session is None or Message.objects.filter(session=session, created_at__gte=cutoff).exists():
            return False  # ended meanwhile, or the coachee came back
        session.status = SessionStatus.ENDED
        session.ended_at = timezone.now()
        session.save(update_fields=["status", "ended_at"])
        event_emit(session_id=session.pk, type="session.ended", payload={})
        compaction.session_summary_schedule(session_id=session.pk)
    return True


INTERNATIONAL = "intl"  # the resources shown where a locale has none: a directory, emergency advice


def crisis_resources_for(locale: str, category: str = CrisisCategory.SUICIDE) -> list[dict[str, str]]:
    """The operator-configured resources of a locale (its region, else its language), else the
    international directory. For abuse, the domestic-violence lines come first."""
    kinds = [ResourceKind.ABUSE, ResourceKind.CRISIS] if category == CrisisCategory.ABUSE else [ResourceKind.CRISIS]
    for candidate in dict.fromkeys([locale, locale.split("-")[0], INTERNATIONAL]):
        rows = list(
            CrisisResource.objects.filter(locale=candidate, active=True, kind__in=kinds)
            .order_by("kind", "order", "name")  # "abuse" sorts before "crisis"
            .values("name", "contact", "url", "description")
        )
        if rows:
            return [{key: str(value) for key, value in row.items()} for row in rows]
    return []


def safety_notice_emit(*, turn: Turn, level: str, category: str = CrisisCategory.SUICIDE) -> None:
    """Show the crisis-resources card beside the reply (escalation refer or crisis), in the
    coachee's language; on crisis, alert the coachee's coaches once the change is committed."""
    locale = turn.session.locale
    event_emit(
        session_id=turn.session_id,
        type="safety.notice",
        payload={
            "turn_id": turn.pk,
            "level": level,
            "category": category,
            "resources": crisis_resources_for(locale, category),
            **safety.card_text(locale, level),
        },
    )
    if level == Escalation.CRISIS:
        turn_id = turn.pk
        # Stability's crisis flags the turn as the pre-gate's does (whose own reason stands).
        Turn.objects.filter(pk=turn_id, flagged=False).update(flagged=True, flag_reason="crisis (Stability)")
        # robust: a failing alert is logged, never raised into the request that stored the turn.
        transaction.on_commit(lambda: coach_alert_crisis(turn_id=turn_id), robust=True)


# Remembered this long, so a redelivered task or a second crisis signal on the same turn (the
# pre-gate, then Stability) sends no second alert. Far longer than any turn lives.
CRISIS_ALERT_TTL_S = 7 * 24 * 3600


def coach_alert_crisis(*, turn_id: int) -> int:
    """Email the coachee's assigned coaches that a turn needs them now; returns how many were told.

    Once per turn. The email names the session and turn and links to the turn's review page; it
    never carries message text (email leaves our systems; the review page is access-controlled).
    The turn itself is already in the admin review queue (escalated and flagged).
    """
    turn = Turn.objects.select_related("session").get(pk=turn_id)
    # The start time too: ids restart when a database is recreated, Redis keys do not.
    key = f"coaching:crisis-alert:{turn_id}:{turn.started_at.timestamp():.6f}"
    try:
        if not cache.add(key, 1, timeout=CRISIS_ALERT_TTL_S):
            return 0
    except Exception:
        # Without Redis the alert may go twice; that is better than not at all.
        logger.exception("crisis alert for turn %s: could not record it in the cache", turn_id)
    emails = list(
        CoachAssignment.objects.filter(coachee_id=turn.session.coachee_id, coach__is_active=True)
        .exclude(coach__email="")
        .order_by("coach_id")
        .values_list("coach__email", flat=True)
    )
    if not emails:
        logger.warning("crisis on turn %s: the coachee has no assigned coach with an email address", turn_id)
        return 0
    review = reverse("admin:agents_coachingsession_review", args=[turn.session_id])
    link = f"{settings.COACHING_SITE_URL}{review}?turn={turn_id}#turn-{turn_id}"
    subject = f"Crisis alert: session {turn.session_id}, turn {turn_id}"
    body = (
        f"A coachee you are assigned to may be in crisis (session {turn.session_id}, turn {turn_id}, "
        f"{timezone.localtime(turn.started_at):%Y-%m-%d %H:%M %Z}).\n\n"
        "They were shown the crisis resources for their locale. Please review the turn now:\n"
        f"{link}\n\n"
        "This email deliberately contains no message text; read it on the review page."
    )
    try:
        # One email per coach: coaches must not see each other's addresses.
        for email in emails:
            send_mail(subject, body, None, [email])
    except Exception:
        logger.exception("crisis alert for turn %s could not be sent", turn_id)
        cache.delete(key)  # let a later crisis signal on this turn try again
        return 0
    logger.warning("crisis on turn %s: %d coach(es) alerted", turn_id, len(emails))
    return len(emails)


def blackboard_item_edit(*, coachee_id: int, item_id: str, text: str | None = None, hidden: bool | None = None) -> None:
    """The coachee corrects or hides something the system remembers: a new version, by them."""
    with transaction.atomic():
        latest = blackboard_lock_latest(coachee_id=coachee_id)
        if latest is None:
            raise KeyError(item_id)
        data = blackboard.edit_item(latest.data, item_id, text=text, hidden=hidden)
        BlackboardVersion.objects.create(
            coachee_id=coachee_id, version=latest.version + 1, data=data, edited_by_id=coachee_id
        )


def blackboard_lock_latest(*, coachee_id: int) -> BlackboardVersion | None:
    """Lock a coachee's blackboard for a write (inside a transaction) and return its latest version.

    The lock is on the coachee's user row, not the latest version: two writers waiting on
    the version row would both read the same version number, and one write would be lost.
    """
    get_user_model().objects.select_for_update().filter(pk=coachee_id).values_list("pk", flat=True).first()
    return selectors.latest_blackboard(coachee_id=coachee_id)


# --- Per-user limits, shared across processes through the Redis cache -------------------------

# The rate limit counts messages in fixed windows of this many seconds.
RATE_WINDOW_S = 60
# Open sockets are leases, not a counter: each socket is a member of its user's sorted set
# (channel name → when its lease ends) and renews its lease while it lives. Whatever ends a
# socket without a clean close (a crashed consumer, a killed process) stops counting within a
# lease; a counter that missed one decrement stayed high for an hour (the probe's finding 4).
SOCKET_LEASE_S = 60
SOCKET_LEASE_RENEW_S = 20


def turn_rate_allows(*, user_id: int) -> bool:
    """One more message this minute? A fixed one-minute window per user."""
    key = f"coaching:turns:{user_id}:{int(time.time() // RATE_WINDOW_S)}"
    cache.add(key, 0, timeout=120)
    return int(cache.incr(key)) <= settings.COACHING_TURNS_PER_MINUTE


def rate_window_ends() -> float:
    """When the current rate-limit window ends (epoch seconds)."""
    return (time.time() // RATE_WINDOW_S + 1) * RATE_WINDOW_S


@functools.lru_cache(maxsize=4)
def _redis_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=1.0)


def _redis() -> redis.Redis:
    # The cache's database; raw commands, since Django's cache API has no sorted sets.
    return _redis_client(f"{settings.REDIS_URL}/{settings.REDIS_DB_BASE + 3}")


def _sockets_key(user_id: int) -> str:
    return f"coaching:sockets:{user_id}"


def socket_open_allowed(*, user_id: int, socket_id: str) -> bool:
    """Take a lease for a new socket of this user; False (and no lease) when too many are open."""
    key = _sockets_key(user_id)
    now = time.time()
    pipe = _redis().pipeline(transaction=True)
    pipe.zremrangebyscore(key, "-inf", now)
    pipe.zadd(key, {socket_id: now + SOCKET_LEASE_S})
    pipe.zcard(key)
    pipe.expire(key, SOCKET_LEASE_S)
    count = int(pipe.execute()[2])
    if count > settings.COACHING_MAX_SOCKETS_PER_USER:
        _redis().zrem(key, socket_id)
        return False
    return True


def socket_lease_renew(*, user_id: int, socket_id: str) -> None:
    key = _sockets_key(user_id)
    pipe = _redis().pipeline(transaction=True)
    pipe.zadd(key, {socket_id: time.time() + SOCKET_LEASE_S})
    pipe.expire(key, SOCKET_LEASE_S)
    pipe.execute()


def socket_closed(*, user_id: int, socket_id: str) -> None:
    _redis().zrem(_sockets_key(user_id), socket_id)


def sockets_open(*, user_id: int) -> int:
    """Sockets of this user holding a live lease."""
    count: int = _redis().zcount(_sockets_key(user_id), time.time(), "+inf")  # type: ignore[assignment]
    return count


def sockets_forget(*, user_id: int) -> None:
    _redis().delete(_sockets_key(user_id))
