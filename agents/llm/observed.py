"""Every model request, measured where it is made: one decorator on each of llm.client's
request functions records its latency, time to first token, requests in flight and the
`chat {model}` span. The agent and turn come from the request's own headers
(llm.structured.request_headers), so the client's signatures stay as they are."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

from agents.llm.errors import LLMCircuitOpen
from agents.observability import metrics, tracing

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from agents.llm.client import Completion, EndpointSpec, StreamState

OK, ERROR, CIRCUIT_OPEN, CANCELLED = "ok", "error", "circuit_open", "cancelled"


def _who(headers: Mapping[str, str] | None) -> tuple[str, int | None]:
    headers = headers or {}
    turn = headers.get("X-Coaching-Turn", "")
    return metrics.agent_label(headers.get("X-Coaching-Agent")), int(turn) if turn.isdigit() else None


def _result_of(exc: BaseException) -> str:
    if isinstance(exc, LLMCircuitOpen):
        return CIRCUIT_OPEN
    if isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
        return CANCELLED
    return ERROR


def _span(spec: EndpointSpec, messages: list[dict[str, str]], kwargs: dict[str, Any]) -> Span | None:
    agent, turn_id = _who(kwargs.get("headers"))
    return tracing.chat_span(
        model=spec.model_id,
        base_url=spec.base_url,
        provider="openai" if spec.kind == "openai" else spec.kind,
        agent=agent,
        turn_id=turn_id,
        max_tokens=kwargs.get("max_tokens"),
        temperature=kwargs.get("temperature"),
        messages=messages,
    )


def observed_completion(func: Callable[..., Completion]) -> Callable[..., Completion]:
    """Around llm.client.chat_complete (blocking, Celery agents)."""

    @functools.wraps(func)
    def wrapper(spec: EndpointSpec, messages: list[dict[str, str]], **kwargs: Any) -> Completion:
        on = metrics.enabled()
        if not on and not tracing.active():
            return func(spec, messages, **kwargs)
        agent, _ = _who(kwargs.get("headers"))
        endpoint = metrics.endpoint_label(spec.name)
        span = _span(spec, messages, kwargs)
        started = time.monotonic()
        if on:
            metrics.LLM_IN_FLIGHT.labels(endpoint).inc()
        result = ERROR
        try:
            completion = func(spec, messages, **kwargs)
        except BaseException as exc:
            result = _result_of(exc)
            tracing.chat_span_end(
                span, input_tokens=None, output_tokens=None, finish_reason=None, output=None, error=exc
            )
            raise
        else:
            result = OK
            tracing.chat_span_end(
                span,
                input_tokens=completion.prompt_tokens,
                output_tokens=completion.completion_tokens,
                finish_reason=completion.finish_reason,
                output=completion.content,
                error=None,
            )
            return completion
        finally:
            if on:
                metrics.LLM_IN_FLIGHT.labels(endpoint).dec()
                metrics.LLM_REQUEST_SECONDS.labels(agent, endpoint, result).observe(time.monotonic() - started)

    return wrapper


def observed_stream(func: Callable[..., AsyncIterator[str]]) -> Callable[..., AsyncIterator[str]]:
    """Around llm.client.chat_stream (Coach, streamed in Daphne). With metrics and traces both
    off the stream is returned as it is: no extra step per token."""

    @functools.wraps(func)
    def wrapper(
        spec: EndpointSpec, messages: list[dict[str, str]], state: StreamState, **kwargs: Any
    ) -> AsyncIterator[str]:
        if not metrics.enabled() and not tracing.active():
            return func(spec, messages, state, **kwargs)
        return _observed(func(spec, messages, state, **kwargs), spec, messages, state, kwargs)

    return wrapper


async def _observed(
    stream: AsyncIterator[str],
    spec: EndpointSpec,
    messages: list[dict[str, str]],
    state: StreamState,
    kwargs: dict[str, Any],
) -> AsyncIterator[str]:
    # The request goes out when the first piece is asked for: timing starts here, not earlier.
    on = metrics.enabled()
    agent, _ = _who(kwargs.get("headers"))
    endpoint = metrics.endpoint_label(spec.name)
    span = _span(spec, messages, kwargs)
    started = time.monotonic()
    first = True
    result = ERROR
    failure: BaseException | None = None
    text: list[str] = []
    if on:
        metrics.LLM_IN_FLIGHT.labels(endpoint).inc()
    try:
        async for piece in stream:
            if first:
                first = False
                if on:
                    metrics.LLM_TTFT_SECONDS.labels(agent, endpoint).observe(time.monotonic() - started)
            if span is not None:
                text.append(piece)
            yield piece
        result = OK
    except BaseException as exc:
        result, failure = _result_of(exc), exc
        raise
    finally:
        await stream.aclose()  # type: ignore[attr-defined]  # an async generator
        if on:
            metrics.LLM_IN_FLIGHT.labels(endpoint).dec()
            metrics.LLM_REQUEST_SECONDS.labels(agent, endpoint, result).observe(time.monotonic() - started)
        tracing.chat_span_end(
            span,
            input_tokens=state.prompt_tokens,
            output_tokens=state.completion_tokens,
            finish_reason=state.finish_reason,
            output="".join(text),
            error=failure if result != CANCELLED else None,
        )
