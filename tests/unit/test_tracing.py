"""Traces in the GenAI conventions, read from the SDK's in-memory exporter: a turn's agents and
model calls join one trace whose ids every process derives from the turn, with token usage and
no message text unless an operator turns it on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agents.models import AgentRun, Turn
from agents.observability import tracing
from agents.pipeline import steps
from agents.turns import finish

CANARY_WORDS = "I keep skipping my runs."  # the conftest turn's message


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = tracing.build_provider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_provider(provider)
    yield exporter
    tracing.use_provider(None)


def by_name(exporter: InMemorySpanExporter) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in exporter.get_finished_spans():
        found.setdefault(span.name, []).append(span)
    return found


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_tracing_is_off_without_an_endpoint(settings: Any) -> None:
    settings.OTEL_EXPORTER_OTLP_ENDPOINT = ""
    tracing.use_provider(None)
    tracing.setup()
    assert not tracing.active()


def test_an_agent_run_and_its_model_call_join_the_turns_trace(turn: Turn, spans: InMemorySpanExporter) -> None:
    assert steps.shadow_step(turn_id=turn.pk) == "succeeded"
    found = by_name(spans)
    (agent,) = found["invoke_agent shadow"]
    (chat,) = found["chat sim-model"]
    trace_id, workflow_span_id = tracing.turn_trace_ids(turn.pk)
    # The agent's parent is the turn's workflow span, by the derived ids; the call's is the agent.
    assert agent.context is not None
    assert chat.context is not None
    assert agent.context.trace_id == chat.context.trace_id == trace_id
    assert agent.parent is not None
    assert agent.parent.span_id == workflow_span_id
    assert chat.parent is not None
    assert chat.parent.span_id == agent.context.span_id
    run = AgentRun.objects.get(turn=turn, agent="shadow")
    assert attrs(agent)["gen_ai.operation.name"] == "invoke_agent"
    assert attrs(agent)["gen_ai.agent.name"] == "shadow"
    assert attrs(agent)["gen_ai.usage.input_tokens"] == run.prompt_tokens
    assert attrs(agent)["gen_ai.usage.output_tokens"] == run.completion_tokens
    call = attrs(chat)
    assert call["gen_ai.operation.name"] == "chat"
    assert call["gen_ai.request.model"] == "sim-model"
    assert call["gen_ai.provider.name"] == "vllm"
    assert call["gen_ai.usage.input_tokens"] == run.prompt_tokens
    assert call["gen_ai.usage.output_tokens"] == run.completion_tokens
    assert call["gen_ai.response.finish_reasons"] == ("stop",)
    # No message text by default, in any attribute.
    for span in spans.get_finished_spans():
        assert not any(CANARY_WORDS in str(value) for value in attrs(span).values()), span.name
        assert "gen_ai.input.messages" not in attrs(span)


def test_message_text_only_when_an_operator_turns_it_on(turn: Turn, spans: InMemorySpanExporter, settings: Any) -> None:
    settings.COACHING_TRACE_CONTENT = True
    steps.shadow_step(turn_id=turn.pk)
    (chat,) = by_name(spans)["chat sim-model"]
    assert CANARY_WORDS in attrs(chat)["gen_ai.input.messages"]
    assert "gen_ai.output.messages" in attrs(chat)


def test_the_turn_is_an_invoke_workflow_span_with_the_derived_ids(
    turn: Turn, spans: InMemorySpanExporter, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        assert finish.turn_finish(turn_id=turn.pk, reply="One small step.", fallback=False, degraded=False)
    (workflow,) = by_name(spans)["invoke_workflow coaching_turn"]
    trace_id, span_id = tracing.turn_trace_ids(turn.pk)
    assert workflow.context is not None
    assert (workflow.context.trace_id, workflow.context.span_id) == (trace_id, span_id)
    assert workflow.parent is None
    assert attrs(workflow)["gen_ai.operation.name"] == "invoke_workflow"
    turn.refresh_from_db()
    assert turn.finished_at is not None
    assert workflow.start_time == int(turn.started_at.timestamp() * 1e9)
    assert workflow.end_time == int(turn.finished_at.timestamp() * 1e9)


def test_coach_span_is_the_parent_of_its_streamed_call(turn: Turn, spans: InMemorySpanExporter) -> None:
    # The streamed call's span is started with Coach's derived id as parent (no context passes
    # between the stream and coach_end); coach_end then records that very span.
    call = tracing.chat_span(
        model="sim-model",
        base_url="http://127.0.0.1:9/v1",
        provider="vllm",
        agent="coach",
        turn_id=turn.pk,
        max_tokens=100,
        temperature=0.3,
        messages=[],
    )
    tracing.chat_span_end(call, input_tokens=10, output_tokens=5, finish_reason="stop", output="hi", error=None)
    tracing.coach_recorded(
        turn_id=turn.pk,
        model="sim-model",
        latency_ms=120,
        status="succeeded",
        error="",
        prompt_tokens=10,
        completion_tokens=5,
    )
    found = by_name(spans)
    (chat,) = found["chat sim-model"]
    (coach,) = found["invoke_agent coach"]
    assert coach.context is not None
    assert chat.parent is not None
    assert chat.parent.span_id == coach.context.span_id
    assert coach.parent is not None
    assert coach.parent.span_id == tracing.turn_trace_ids(turn.pk)[1]


def test_ids_differ_between_turns() -> None:
    assert tracing.turn_trace_ids(1) != tracing.turn_trace_ids(2)
    assert tracing.agent_span_id(1, "coach") != tracing.agent_span_id(2, "coach")
