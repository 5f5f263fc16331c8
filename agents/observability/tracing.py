"""OpenTelemetry traces in the GenAI semantic conventions; off unless an OTLP endpoint is set.

    invoke_workflow coaching_turn          (the turn: accept -> full answer)
      invoke_agent coach | shadow | ...    (one agent run)
        chat {model}                       (one model request, with gen_ai.usage.*)

A turn crosses processes (Coach in Daphne, the rest in Celery workers, the end in whichever
delivers it), and no process sees all of it. So the ids are derived from the turn's id: every
process computes the same trace id and the same span id for the turn's workflow span (and for
Coach's agent span, recorded when the reply ends), and its spans join the one trace without
passing a context along. The workflow span itself is recorded when the turn ends, with the
turn's start as its start.

No message text unless COACHING_TRACE_CONTENT is on: then chat spans carry the request's
messages and the reply (gen_ai.input.messages / gen_ai.output.messages).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

from django.conf import settings
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags

if TYPE_CHECKING:
    from agents.pipeline.runner import JsonCallResult

WORKFLOW_NAME = "coaching_turn"
_tracer: trace.Tracer | None = None
# (trace id, span id) the next span must take: set around one start_span call (_TurnIds).
_forced_ids: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar("forced_ids", default=None)
ResultT = TypeVar("ResultT")


class _TurnIds(RandomIdGenerator):
    """Random ids, except for the spans whose ids every process derives from the turn."""

    def generate_span_id(self) -> int:
        forced = _forced_ids.get()
        return forced[1] if forced is not None else super().generate_span_id()

    def generate_trace_id(self) -> int:
        forced = _forced_ids.get()
        return forced[0] if forced is not None else super().generate_trace_id()


def build_provider() -> TracerProvider:
    return TracerProvider(
        resource=Resource.create({"service.name": settings.OTEL_SERVICE_NAME}), id_generator=_TurnIds()
    )


def setup() -> None:
    """Once per process (AgentsConfig.ready): export over OTLP/HTTP when an endpoint is set."""
    endpoint = settings.OTEL_EXPORTER_OTLP_ENDPOINT
    if not endpoint:
        return
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = build_provider()
    # Batched in a background thread: a span costs the request path a queue append.
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")))
    use_provider(provider)


def use_provider(provider: TracerProvider | None) -> None:
    """Trace through this provider (tests pass one with an in-memory exporter); None: off."""
    global _tracer
    _tracer = provider.get_tracer("coaching") if provider is not None else None


def active() -> bool:
    return _tracer is not None


def _derived(*parts: object) -> bytes:
    db = settings.DATABASES["default"].get("NAME", "")
    return hashlib.sha256(":".join(map(str, (settings.OTEL_SERVICE_NAME, db, *parts))).encode()).digest()


def turn_trace_ids(turn_id: int) -> tuple[int, int]:
    """(trace id, workflow span id) of a turn, the same in every process."""
    digest = _derived("turn", turn_id)
    return int.from_bytes(digest[:16], "big") or 1, int.from_bytes(digest[16:24], "big") or 1


def agent_span_id(turn_id: int, agent: str) -> int:
    return int.from_bytes(_derived("agent", turn_id, agent)[:8], "big") or 1


def _remote_parent(trace_id: int, span_id: int) -> otel_context.Context:
    parent = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return trace.set_span_in_context(NonRecordingSpan(parent))


def _workflow_parent(turn_id: int) -> otel_context.Context:
    return _remote_parent(*turn_trace_ids(turn_id))


@contextlib.contextmanager
def _ids(trace_id: int, span_id: int) -> Iterator[None]:
    token = _forced_ids.set((trace_id, span_id))
    try:
        yield
    finally:
        _forced_ids.reset(token)


def _ns(at: datetime | float) -> int:
    return int((at.timestamp() if isinstance(at, datetime) else at) * 1e9)


# --- The turn and its agents --------------------------------------------------------------


def workflow_recorded(*, turn_id: int, started_at: datetime, finished_at: datetime, attributes: dict[str, Any]) -> None:
    """The turn's span, recorded once it has ended (turns.finish.turn_finish)."""
    if _tracer is None:
        return
    trace_id, span_id = turn_trace_ids(turn_id)
    with _ids(trace_id, span_id):
        span = _tracer.start_span(
            f"invoke_workflow {WORKFLOW_NAME}",
            context=otel_context.Context(),  # a root: the trace's id is the forced one
            kind=SpanKind.INTERNAL,
            start_time=_ns(started_at),
            attributes={
                "gen_ai.operation.name": "invoke_workflow",
                "gen_ai.workflow.name": WORKFLOW_NAME,
                "gen_ai.agent.name": WORKFLOW_NAME,
                "coaching.turn.id": turn_id,
                **attributes,
            },
        )
    span.end(end_time=_ns(finished_at))


def _agent_attributes(agent: str, turn_id: int, round: int) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "coaching.turn.id": turn_id,
        "coaching.agent.round": round,
    }


def traced_agent_run(func: Callable[..., JsonCallResult]) -> Callable[..., JsonCallResult]:
    """`invoke_agent {name}` around one JSON agent's run (pipeline.runner.run_json_agent); its model
    calls, made in the same thread, become its children."""

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> JsonCallResult:
        if _tracer is None:
            return func(**kwargs)
        turn_id, agent, round = kwargs["turn"].pk, str(kwargs["agent"]), int(kwargs.get("round", 1))
        with _tracer.start_as_current_span(
            f"invoke_agent {agent}",
            context=_workflow_parent(turn_id),
            kind=SpanKind.INTERNAL,
            attributes=_agent_attributes(agent, turn_id, round),
        ) as span:
            result = func(**kwargs)
            _run_attributes(span, result.run)
            return result

    return wrapper


def _run_attributes(span: Span, run: Any) -> None:
    span.set_attribute("coaching.agent.status", str(run.status))
    span.set_attribute("coaching.agent.attempts", int(run.attempts or 0))
    if run.model_id:
        span.set_attribute("gen_ai.request.model", str(run.model_id))
    if run.prompt_tokens:
        span.set_attribute("gen_ai.usage.input_tokens", int(run.prompt_tokens))
    if run.completion_tokens:
        span.set_attribute("gen_ai.usage.output_tokens", int(run.completion_tokens))
    if run.status == "failed":
        span.set_attribute("error.type", (run.error or "failed").split(":", 1)[0])
        span.set_status(Status(StatusCode.ERROR))


def coach_recorded(
    *, turn_id: int, model: str, latency_ms: int, status: str, error: str, prompt_tokens: int, completion_tokens: int
) -> None:
    """Coach's `invoke_agent coach`, recorded when its reply ends (coach.coach_end). Its id is
    derived, so the streamed request's span, ended earlier, is already its child."""
    if _tracer is None:
        return
    trace_id, _ = turn_trace_ids(turn_id)
    now = time.time()
    with _ids(trace_id, agent_span_id(turn_id, "coach")):
        span = _tracer.start_span(
            "invoke_agent coach",
            context=_workflow_parent(turn_id),
            kind=SpanKind.INTERNAL,
            start_time=_ns(now - latency_ms / 1000),
            attributes={
                **_agent_attributes("coach", turn_id, 1),
                "gen_ai.request.model": model,
                "gen_ai.usage.input_tokens": prompt_tokens,
                "gen_ai.usage.output_tokens": completion_tokens,
                "coaching.agent.status": status,
            },
        )
    if error:
        span.set_attribute("error.type", error.split(":", 1)[0])
        span.set_status(Status(StatusCode.ERROR))
    span.end(end_time=_ns(now))


# --- Model requests -----------------------------------------------------------------------


def chat_span(
    *,
    model: str,
    base_url: str,
    provider: str,
    agent: str,
    turn_id: int | None,
    max_tokens: int | None,
    temperature: float | None,
    messages: Sequence[dict[str, str]],
) -> Span | None:
    """Start `chat {model}` (ended by the caller). Its parent: the current agent span (a Celery
    agent's run), else Coach's derived agent span, else none (calls outside a turn)."""
    if _tracer is None:
        return None
    current = trace.get_current_span().get_span_context()
    if current.is_valid:
        parent = None  # the current context
    elif turn_id is not None:
        parent = _remote_parent(turn_trace_ids(turn_id)[0], agent_span_id(turn_id, agent))
    else:
        parent = otel_context.Context()
    url = urlparse(base_url)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "gen_ai.agent.name": agent,
        "server.address": url.hostname or "",
    }
    if url.port:
        attributes["server.port"] = url.port
    if max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = max_tokens
    if temperature is not None:
        attributes["gen_ai.request.temperature"] = temperature
    if settings.COACHING_TRACE_CONTENT:
        attributes["gen_ai.input.messages"] = json.dumps(
            [{"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]} for m in messages],
            ensure_ascii=False,
        )
    return _tracer.start_span(f"chat {model}", context=parent, kind=SpanKind.CLIENT, attributes=attributes)


def chat_span_end(
    span: Span | None,
    *,
    input_tokens: int | None,
    output_tokens: int | None,
    finish_reason: str | None,
    output: str | None,
    error: BaseException | None,
) -> None:
    if span is None:
        return
    if input_tokens is not None:
        span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
    if output_tokens is not None:
        span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
    if finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])
    if output is not None and settings.COACHING_TRACE_CONTENT:
        span.set_attribute(
            "gen_ai.output.messages",
            json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": output}]}], ensure_ascii=False),
        )
    if error is not None:
        span.set_attribute("error.type", getattr(error, "code", type(error).__name__))
        span.set_status(Status(StatusCode.ERROR))
    span.end()
