"""Coach: the immediate, streamed reply, generated in the ASGI process.

It runs beside the Celery canvas, not before it, so it adds nothing to the full answer's
critical path. Here is Coach's work on a database thread: the accept and the prepared request
(coach_accept), the reply's message and run (coach_record_start), the snapshots and the end
(coach_end). The stream itself, on the event loop, is coach_stream.py.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents import selectors
from agents.llm.client import EndpointSpec, StreamState, chat_stream
from agents.llm.errors import LLMCircuitOpen, LLMError
from agents.llm.routing import Route, RouteReport, cache_salt_for, first_available, routes_for, stream_routed
from agents.llm.schema import extra_body_for
from agents.memory import tokens
from agents.memory.context import SharedContext, agent_messages
from agents.models import (
    Agent,
    AgentRun,
    Message,
    MessageStatus,
    QualityFinding,
    Role,
    RunStatus,
    Turn,
)
from agents.observability import hooks as observe
from agents.pipeline import reply_gate
from agents.pipeline.runner import catalog_text, turn_shared_context
from agents.prompts import render_prompt
from agents.roles import turn_setup
from agents.roles.structured import request_headers
from agents.roles.turn_setup import TurnSetup
from agents.safety import quality
from agents.transactions import bookkeeping_atomic
from agents.turns import accept, event_log, finish, limits

logger = logging.getLogger(__name__)

USER_FACING_ERRORS = {
    "llm_unavailable": "The coaching model cannot be reached right now. Your message is saved; "
    "the full answer will follow if the model comes back, or you can send it again later.",
    "llm_misconfigured": "The coaching model is not set up correctly. Your message is saved; "
    "an operator has been told.",
    "llm_circuit_open": "The coaching model is not answering right now. Your message is saved; "
    "you will get a shorter answer.",
    "llm_busy": "The coaching model is busy right now. Your message is saved; the full answer will follow.",
}
# A reply that failed after its first words: what was shown stays, marked as cut off.
CUT_OFF_ERROR = (
    "The immediate reply was cut off: the coaching model stopped answering. Your message is saved; "
    "the full answer will follow if the model comes back, or you can send it again."
)


@dataclass
class CoachCall:
    turn_id: int
    session_id: int
    spec: EndpointSpec
    messages: list[dict[str, str]]
    max_tokens: int
    temperature: float
    extra_body: dict[str, Any]
    deadline: float
    run_inputs: dict[str, Any]  # what Coach's AgentRun records about its inputs
    shared: SharedContext  # the turn's shared prefix, stored on the turn by coach_accept
    context_budget: int
    turn: Turn  # as coach_prepare read it (read-only)
    # The endpoint's breaker, asked in coach_prepare's thread (no thread hop before the request).
    circuit_open: LLMCircuitOpen | None
    # The endpoints to try, the first one's breaker already asked; fallbacks only before the
    # first token (routing.stream_routed). `route` says which one answered.
    routes: list[Route] = dataclasses.field(default_factory=list)
    route: RouteReport = dataclasses.field(default_factory=RouteReport)
    thinking: bool = False
    cache_salt: str | None = None
    blocked_moves: list[str] = dataclasses.field(default_factory=list)  # blocked on the previous turn
    # Set by coach_gate_prepare (in coach_record_start, before the relay): what the reply is
    # checked against, and whether it is held back (not streamed) until it passes, because
    # this coachee has known risks.
    expect: quality.Expectations = dataclasses.field(default_factory=quality.Expectations)
    hold: bool = False
    # Set by coach_stream.coach_relay when the text so far failed the gate while streaming.
    live_findings: list[quality.Finding] = dataclasses.field(default_factory=list)
    # Set by coach_record_start, once the reply's message and run exist.
    message_id: int = 0
    run_id: int = 0
    state: StreamState = dataclasses.field(default_factory=StreamState)  # filled in by the stream

    def stream(self) -> AsyncIterator[str]:
        """The reply's pieces, filling in `state`; the request goes out when the first is asked
        for. A fallback endpoint is asked only while no token has come (never a reply spliced
        from two models)."""
        state = self.state
        if self.circuit_open is not None:
            return _refused(self.circuit_open)
        if not self.routes:
            return self._stream_on(self.spec, self.extra_body, state, circuit_checked=True)

        def open_stream(route: Route, index: int) -> AsyncIterator[str]:
            if index == 0 and route.spec == self.spec:
                return self._stream_on(self.spec, self.extra_body, state, circuit_checked=True)
            body = extra_body_for(
                route.spec.kind,
                thinking=self.thinking,
                priority_of=Agent.COACH if route.spec.priority_scheduling else None,
                cache_salt=self.cache_salt,
            )
            return self._stream_on(route.spec, body, state, circuit_checked=False)

        return stream_routed(self.routes, open_stream, deadline=self.deadline, report=self.route)

    def _stream_on(
        self, spec: EndpointSpec, extra_body: dict[str, Any], state: StreamState, *, circuit_checked: bool
    ) -> AsyncIterator[str]:
        return chat_stream(
            spec,
            self.messages,
            state,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            extra_body=extra_body,
            headers=request_headers(Agent.COACH, self.turn_id),
            timeout_s=max(1.0, self.deadline - time.time()),
            circuit_checked=circuit_checked,
        )


def previous_blocked_moves(turn: Turn) -> list[str]:
    """What Stability blocked on this coachee's previous turn, so the fast path is not blind."""
    stability = selectors.previous_output(
        coachee_id=turn.session.coachee_id, agent=Agent.STABILITY, before=turn.started_at
    )
    return list((stability or {}).get("blocked_moves", []))


def coach_prepare(turn: Turn) -> CoachCall | None:
    """Everything Coach's request needs for a turn just accepted (read-only, still running: its
    status is not read again); the turn's shared prefix is built and stored here (the first step
    that needs it). None when Coach does not run."""
    setup = turn_setup.setup_for(turn.pk)
    config = setup.config(Agent.COACH)
    if not config.enabled or turn.coach_message_id is not None:
        return None
    # The primary's breaker first, then each fallback's: the first that lets a call through
    # gets the request; refused only when every one is open.
    routes, refusal = first_available(routes_for(config))
    circuit_open = refusal if isinstance(refusal, LLMCircuitOpen) else None
    shared = turn_shared_context(turn)
    # Read by the build (the usual case), else once more here.
    blocked = (
        shared.previous_blocked_moves if shared.previous_blocked_moves is not None else previous_blocked_moves(turn)
    )
    return _call_for(
        turn, setup, shared, blocked, deadline=turn.deadline_at.timestamp(), circuit_open=circuit_open, routes=routes
    )


def coach_gate_prepare(call: CoachCall) -> None:
    """What Coach's reply will be checked against, and whether it must be held until it ends
    (known risks). The request does not need it, the relay does: read after the request is
    out (coach_record_start), before any of the reply is relayed."""
    call.expect = reply_gate.expectations_for(
        call.turn,
        wording=[m["content"] for m in call.messages],
        blocked=call.blocked_moves,
        catalog=turn_setup.setup_for(call.turn_id).catalog,
    )
    call.hold = reply_gate.risks_known(call.turn, call.expect)


def _call_for(
    turn: Turn,
    setup: TurnSetup,
    shared: SharedContext,
    blocked: list[str],
    *,
    deadline: float,
    circuit_open: LLMCircuitOpen | None = None,
    routes: list[Route] | None = None,
) -> CoachCall:
    config = setup.config(Agent.COACH)
    prompt = setup.prompt(Agent.COACH)
    values = {"blocked_moves": catalog_text(setup.catalog, blocked) if blocked else "none"}
    routes = routes if routes is not None else routes_for(config)
    spec = routes[0].spec
    salt = cache_salt_for(turn.session.coachee_id)
    return CoachCall(
        turn_id=turn.pk,
        session_id=turn.session_id,
        spec=spec,
        messages=agent_messages(shared, render_prompt(prompt.body, values)),
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        extra_body=extra_body_for(
            spec.kind,
            thinking=config.thinking,
            priority_of=Agent.COACH if spec.priority_scheduling else None,
            cache_salt=salt,
        ),
        deadline=deadline,
        shared=shared,
        context_budget=config.context_budget,
        turn=turn,
        circuit_open=circuit_open,
        routes=routes,
        thinking=config.thinking,
        cache_salt=salt,
        blocked_moves=list(blocked),
        run_inputs={
            "prompt_version": prompt,
            "endpoint": config.endpoint,
            "model_id": config.endpoint.model_id,
            "context_dropped": shared.dropped,
            "prompt_values": values,
        },
    )


def coach_record_start(*, call: CoachCall) -> None:
    """Read what the reply is checked against, then create the Coach message and run and
    announce them: all while the model prepares its first token (coach_stream.coach_run sends the request
    first)."""
    coach_gate_prepare(call)
    # Bookkeeping commit: the message is empty until coach_end, which commits durably.
    with bookkeeping_atomic():
        # The turn's row before the session's (next_seq), the order every other writer of a
        # running turn takes (turn_finish, coach_end, arbitration): the other way round, the
        # fault-matrix test saw PostgreSQL abort this against an arbitration for a deadlock.
        Turn.objects.select_for_update().filter(pk=call.turn_id).values_list("pk", flat=True).first()
        seq = event_log.next_seq(call.session_id)
        message = Message.objects.create(
            session_id=call.session_id, seq=seq, role=Role.COACH, text="", status=MessageStatus.STREAMING
        )
        Turn.objects.filter(pk=call.turn_id).update(coach_message=message)
        run = AgentRun.objects.create(turn_id=call.turn_id, agent=Agent.COACH, **call.run_inputs)
        event_log.event_emit(
            session_id=call.session_id,
            type="coach.started",
            seq=seq,
            payload={"turn_id": call.turn_id, "message_id": message.pk},
        )
    call.message_id, call.run_id = message.pk, run.pk


def coach_snapshot(*, message_id: int, text: str) -> None:
    with bookkeeping_atomic():
        Message.objects.filter(pk=message_id, status=MessageStatus.STREAMING).update(text=text)


def coach_end(
    *, call: CoachCall, text: str, status: str, state: StreamState, latency_ms: int, error: LLMError | None
) -> None:
    """Persist the reply and its run, then announce it (and any error) to the session."""
    # llama.cpp's server reports no usage when streaming: then the documented estimate.
    prompt_tokens = state.prompt_tokens or sum(tokens.estimate_tokens(m["content"]) for m in call.messages)
    overhead = tokens.MESSAGE_OVERHEAD_TOKENS * len(call.messages)
    context: dict[str, Any] = {
        **call.run_inputs["context_dropped"],
        "shared_tokens": call.shared.tokens,
        "own_tokens": max(0, prompt_tokens - call.shared.tokens - overhead),
    }
    if prompt_tokens > call.context_budget:
        context["over_budget_by"] = prompt_tokens - call.context_budget
    findings = coach_findings(call, text, status)
    shown, shown_status = (
        (reply_gate.withdrawn_notice(call.expect.languages), MessageStatus.WITHDRAWN) if findings else (text, status)
    )
    with transaction.atomic():
        ended = Message.objects.filter(pk=call.message_id, status=MessageStatus.STREAMING).update(
            text=shown, status=shown_status, updated_at=timezone.now()
        )
        if not ended:
            # The watchdog already closed it as interrupted (past the deadline): once is enough.
            return
        AgentRun.objects.filter(pk=call.run_id).update(
            status=RunStatus.FAILED if error else RunStatus.SUCCEEDED,
            attempts=1,
            raw_output=text,
            error=f"{error.code}: {error}"
            if error
            else ("stopped by the coachee" if status == MessageStatus.STOPPED else ""),
            prompt_tokens=prompt_tokens,
            context_tokens=prompt_tokens,
            context_dropped=context,
            completion_tokens=state.completion_tokens or state.chunks,
            finished_at=timezone.now(),
            latency_ms=latency_ms,
            **_route_fields(call),
        )
        Turn.objects.filter(pk=call.turn_id).update(coach_done_at=timezone.now())
        if findings:
            # Withdrawn (or, held, never shown): the original stays on the run for the review,
            # the turn is flagged, and Synth's gated answer stands alone as the reply.
            verb = "withheld" if call.hold else "withdrawn"
            Turn.objects.filter(pk=call.turn_id).update(
                flagged=True, flag_reason=f"coach reply {verb}: {quality.summary(findings)}"[:200]
            )
            reply_gate.findings_record(
                turn_id=call.turn_id,
                surface=QualityFinding.Surface.COACH,
                findings=findings,
                action=QualityFinding.Action.WITHHELD if call.hold else QualityFinding.Action.WITHDRAWN,
            )
        accept.turn_canvas_after_coach(turn_id=call.turn_id)
        event_log.event_emit(
            session_id=call.session_id,
            type="coach.done",
            payload={"turn_id": call.turn_id, "message_id": call.message_id, "text": shown, "status": shown_status},
        )
        if error is not None:
            event_log.event_emit(
                session_id=call.session_id,
                type="error",
                payload={
                    "turn_id": call.turn_id,
                    "code": error.code,
                    "detail": CUT_OFF_ERROR
                    if text
                    else USER_FACING_ERRORS.get(error.code, "The immediate reply failed. Your message is saved."),
                },
            )
            finish.degraded_notice_emit(turn_id=call.turn_id, reason="coach_failed")
    observe.coach_ended(call=call, error=error, state=state, latency_ms=latency_ms, prompt_tokens=prompt_tokens)


def _route_fields(call: CoachCall) -> dict[str, Any]:
    """What routing did for Coach's run: the endpoint that answered when it was a fallback,
    the primary it replaced, and the wait for a slot."""
    fields: dict[str, Any] = {"slot_wait_ms": call.route.slot_wait_ms}
    primary = call.run_inputs["endpoint"]
    served = call.route.served
    if served is not None and served.spec.name != primary.name:
        fields.update(endpoint_id=served.endpoint_id, model_id=served.spec.model_id, fallback_from_id=primary.pk)
    return fields


def coach_findings(call: CoachCall, text: str, status: str) -> list[quality.Finding]:
    """What keeps Coach's reply from the coachee. A held reply shows only once it is complete
    and passes; a streamed one is checked when it ends (and withdrawn if it fails)."""
    if not text:
        return []
    if call.hold and status != MessageStatus.COMPLETE:
        return [quality.Finding("empty", f"held reply ended {status}, unchecked")]
    if call.live_findings:
        return call.live_findings  # stopped while streaming, nothing after the last checked words shown
    if status == MessageStatus.STOPPED:
        return []  # the coachee stopped it mid-sentence: what they saw stays as they left it
    # Failed mid-stream: a few words are expected, what they say is still checked.
    return quality.reply_findings(text, call.expect, cut_off=status == MessageStatus.FAILED)


@dataclass(frozen=True)
class Accepted:
    result: accept.AcceptResult | None  # None: over the rate limit, nothing stored
    call: CoachCall | None = None  # Coach's request, prepared; None when Coach does not run


def coach_accept(*, session_id: int, user_id: int, client_id: str, text: str) -> Accepted:
    """The rate limit, turn_accept and Coach's preparation, in one call on a database thread
    (each hop from the event loop to it and back cost about a millisecond before Coach's first
    token).

    Coach's preparation builds the turn's shared prefix and stores it on the turn, once, before
    the caller queues the canvas (pipeline_start, once Coach's request is out): every agent
    then starts from the same text (and vLLM's prefix cache holds it once). When Coach does not
    run (a crisis answer, Coach off), Shadow builds it."""
    if not limits.turn_rate_allows(user_id=user_id):
        return Accepted(None)
    result = accept.turn_accept(
        session_id=session_id, user_id=user_id, client_id=client_id, text=text, one_turn_at_a_time=True
    )
    if result.turn is None:
        return Accepted(result)
    try:
        call = coach_prepare(result.turn)
    except Exception:
        # Coach could not even start (configuration, database): the full answer still comes.
        logger.exception("coach could not start on turn %s", result.turn_id)
        call = None
    return Accepted(result, call)


async def _refused(error: LLMError) -> AsyncIterator[str]:
    """A stream that fails at once, like chat_stream when the breaker refuses the call."""
    raise error
    yield ""  # unreachable: makes this an async generator
