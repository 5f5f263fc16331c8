"""The model client: error sorting, and real calls against the simulated server."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx2
import openai
import pytest

from agents.llm.client import EndpointSpec, StreamState, chat_complete, chat_stream, translate_error
from agents.llm.errors import (
    LLMError,
    LLMOutputError,
    LLMPermanentError,
    LLMRequestsDisabled,
    LLMTransientError,
)
from agents.llm.simulator.server import SimulatorServer
from agents.llm.simulator.tokens import token_pieces

pytestmark = pytest.mark.timeout(60)

REQUEST = httpx2.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
MESSAGES = [{"role": "system", "content": "You are a coach."}, {"role": "user", "content": "I skipped my run."}]
AGENT = "client-test"
HEADERS = {"X-Coaching-Agent": AGENT}
REPLY = "That happens. What is one tiny step you could take tomorrow morning?"


def status_error(status: int) -> openai.APIStatusError:
    response = httpx2.Response(status, request=REQUEST)
    classes: dict[int, type[openai.APIStatusError]] = {
        400: openai.BadRequestError,
        401: openai.AuthenticationError,
        404: openai.NotFoundError,
        422: openai.UnprocessableEntityError,
        429: openai.RateLimitError,
        500: openai.InternalServerError,
        503: openai.InternalServerError,
    }
    return classes[status](f"status {status}", response=response, body=None)


def spec_for(sim: SimulatorServer, kind: str = "vllm") -> EndpointSpec:
    return EndpointSpec(name="sim", kind=kind, base_url=sim.base_url, model_id="sim-model", read_timeout_s=10.0)


# --- translate_error -----------------------------------------------------------------------


def test_timeouts_are_transient() -> None:
    error = translate_error(openai.APITimeoutError(request=REQUEST))
    assert type(error) is LLMTransientError
    assert "timed out" in str(error)


def test_connection_failures_are_transient() -> None:
    error = translate_error(openai.APIConnectionError(request=REQUEST))
    assert type(error) is LLMTransientError
    assert "unreachable" in str(error)


@pytest.mark.parametrize("status", [429, 500, 503])
def test_rate_limits_and_server_errors_are_transient(status: int) -> None:
    error = translate_error(status_error(status))
    assert type(error) is LLMTransientError
    assert str(status) in str(error)
    assert error.code == "llm_unavailable"


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_are_permanent(status: int) -> None:
    error = translate_error(status_error(status))
    assert type(error) is LLMPermanentError
    assert str(status) in str(error)
    assert error.code == "llm_misconfigured"


def test_our_own_errors_pass_through_unchanged() -> None:
    original = LLMOutputError("bad", raw="{", errors=["x"])
    assert translate_error(original) is original


def test_other_failures_are_transient() -> None:
    assert type(translate_error(openai.OpenAIError("odd"))) is LLMTransientError
    error = translate_error(RuntimeError("socket closed"))
    assert type(error) is LLMTransientError
    assert "RuntimeError" in str(error)


# --- chat_complete ---------------------------------------------------------------------------


def test_requests_are_refused_without_the_simulator() -> None:
    # The autouse fixture switched requests off; nothing listens on port 9 either way.
    spec = EndpointSpec(name="x", kind="vllm", base_url="http://127.0.0.1:9/v1", model_id="m")
    with pytest.raises(LLMRequestsDisabled, match="disabled"):
        chat_complete(spec, MESSAGES, max_tokens=10, temperature=0.0)


def test_chat_complete_returns_content_and_usage(sim: SimulatorServer) -> None:
    sim.configure(agents={AGENT: {"script": [REPLY]}})
    completion = chat_complete(spec_for(sim), MESSAGES, max_tokens=200, temperature=0.2, headers=HEADERS)
    assert completion.content == REPLY
    assert completion.finish_reason == "stop"
    calls = sim.calls(agent=AGENT)
    assert len(calls) == 1
    assert completion.prompt_tokens == calls[0]["prompt_tokens"]
    assert completion.prompt_tokens is not None
    assert completion.prompt_tokens > 0
    assert completion.completion_tokens == len(token_pieces(REPLY))
    assert calls[0]["stream"] is False
    assert calls[0]["model"] == "sim-model"


def test_chat_complete_sends_the_response_format_and_turn_header(sim: SimulatorServer) -> None:
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    completion = chat_complete(
        spec_for(sim),
        MESSAGES,
        max_tokens=50,
        temperature=0.0,
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}},
        headers={**HEADERS, "X-Coaching-Turn": "42"},
    )
    assert completion.content in ('{"ok": true}', '{"ok": false}')
    calls = sim.calls(agent=AGENT, turn=42)
    assert len(calls) == 1
    assert calls[0]["response_format_type"] == "json_schema"


def test_a_token_limit_is_reported_as_length(sim: SimulatorServer) -> None:
    sim.configure(agents={AGENT: {"script": [REPLY]}})
    completion = chat_complete(spec_for(sim), MESSAGES, max_tokens=3, temperature=0.0, headers=HEADERS)
    assert completion.finish_reason == "length"
    assert completion.content == "".join(token_pieces(REPLY)[:3])


@pytest.mark.parametrize(("fault", "error"), [("http_500", LLMTransientError), ("http_429", LLMTransientError)])
def test_server_faults_become_transient_errors(sim: SimulatorServer, fault: str, error: type[LLMError]) -> None:
    sim.configure(agents={AGENT: {"fault": fault}})
    with pytest.raises(error) as info:
        chat_complete(spec_for(sim), MESSAGES, max_tokens=20, temperature=0.0, headers=HEADERS)
    assert type(info.value) is error
    assert fault.removeprefix("http_") in str(info.value)
    assert isinstance(info.value.__cause__, openai.APIStatusError)
    # The client never retries on its own: the pipeline decides.
    assert len(sim.calls(agent=AGENT)) == 1


def test_a_bad_request_becomes_a_permanent_error(sim: SimulatorServer) -> None:
    sim.configure(agents={AGENT: {"fault": "http_400"}})
    with pytest.raises(LLMPermanentError) as info:
        chat_complete(spec_for(sim), MESSAGES, max_tokens=20, temperature=0.0, headers=HEADERS)
    assert type(info.value) is LLMPermanentError
    assert "400" in str(info.value)
    assert len(sim.calls(agent=AGENT)) == 1


def test_a_fault_for_one_call_only_then_succeeds(sim: SimulatorServer) -> None:
    sim.configure(agents={AGENT: {"fault": "http_500", "fault_times": 1, "script": [REPLY]}})
    with pytest.raises(LLMTransientError):
        chat_complete(spec_for(sim), MESSAGES, max_tokens=100, temperature=0.0, headers=HEADERS)
    completion = chat_complete(spec_for(sim), MESSAGES, max_tokens=100, temperature=0.0, headers=HEADERS)
    assert completion.content == REPLY


def test_a_slow_server_times_out_as_a_transient_error(sim: SimulatorServer) -> None:
    sim.configure(agents={AGENT: {"fault": "timeout", "delay_s": 20}})
    started = time.monotonic()
    with pytest.raises(LLMTransientError, match="timed out"):
        chat_complete(spec_for(sim), MESSAGES, max_tokens=20, temperature=0.0, headers=HEADERS, timeout_s=0.3)
    assert time.monotonic() - started < 10  # the call's timeout, not the server's 20 s stall


def test_nothing_listening_is_a_transient_error(sim: SimulatorServer) -> None:
    spec = EndpointSpec(name="x", kind="vllm", base_url="http://127.0.0.1:9/v1", model_id="m", connect_timeout_s=1)
    with pytest.raises(LLMTransientError, match="unreachable"):
        chat_complete(spec, MESSAGES, max_tokens=10, temperature=0.0)


# --- chat_stream -----------------------------------------------------------------------------


async def test_chat_stream_yields_pieces_that_join_to_the_text(sim: SimulatorServer) -> None:
    sim.configure(agents={AGENT: {"script": [REPLY], "ttft_ms": 0, "tokens_per_s": 0}})
    state = StreamState()
    pieces = [
        piece
        async for piece in chat_stream(spec_for(sim), MESSAGES, state, max_tokens=200, temperature=0.5, headers=HEADERS)
    ]
    assert "".join(pieces) == REPLY
    assert len(pieces) > 1
    assert state.chunks == len(pieces)
    assert state.finish_reason == "stop"
    assert state.first_token_at is not None
    calls = sim.calls(agent=AGENT)
    assert len(calls) == 1
    assert calls[0]["stream"] is True
    # vLLM is asked for usage in the stream.
    assert state.prompt_tokens == calls[0]["prompt_tokens"]
    assert state.completion_tokens == len(token_pieces(REPLY))


async def test_the_state_says_when_the_server_has_the_request_before_its_first_token(sim: SimulatorServer) -> None:
    # Coach's other first writes wait for this (chat.coach_stream.request_out), not for the first token.
    sim.configure(agents={AGENT: {"script": [REPLY], "ttft_ms": 1500, "tokens_per_s": 0}})
    state = StreamState()
    stream = chat_stream(spec_for(sim), MESSAGES, state, max_tokens=200, temperature=0.5, headers=HEADERS)
    first = asyncio.ensure_future(anext(stream))
    try:
        await asyncio.wait_for(state.answered.wait(), timeout=1.0)
        assert not first.done()  # answered, and the model still prepares its first token
        assert await first
    finally:
        first.cancel()
        await stream.aclose()  # type: ignore[attr-defined]  # async generators have aclose


async def test_chat_stream_from_llamacpp_has_no_usage(sim: SimulatorServer) -> None:
    sim.configure(agents={AGENT: {"script": [REPLY], "ttft_ms": 0, "tokens_per_s": 0}})
    state = StreamState()
    pieces = [
        piece
        async for piece in chat_stream(
            spec_for(sim, "llamacpp"), MESSAGES, state, max_tokens=200, temperature=0.5, headers=HEADERS
        )
    ]
    assert "".join(pieces) == REPLY
    assert state.prompt_tokens is None
    assert state.completion_tokens is None
    assert state.finish_reason == "stop"


async def test_chat_stream_fault_is_transient(sim: SimulatorServer) -> None:
    sim.configure(agents={AGENT: {"fault": "http_500"}})
    state = StreamState()
    with pytest.raises(LLMTransientError, match="500"):
        async for _ in chat_stream(spec_for(sim), MESSAGES, state, max_tokens=20, temperature=0.0, headers=HEADERS):
            pass
    assert state.chunks == 0


async def test_chat_stream_refused_without_the_simulator() -> None:
    spec = EndpointSpec(name="x", kind="vllm", base_url="http://127.0.0.1:9/v1", model_id="m")
    with pytest.raises(LLMRequestsDisabled):
        async for _ in chat_stream(spec, MESSAGES, StreamState(), max_tokens=10, temperature=0.0):
            pass


# --- The stream as the server writes it (server-sent events, read without the client's models) ---


async def serve_once(body: bytes) -> tuple[asyncio.Server, str]:
    """An HTTP server that answers every request with this event stream, as written."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lengths = [line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
        length = int(lengths[0])
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n" + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/v1"


def event(data: dict[str, object]) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def piece(text: str) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}


async def stream_from(body: bytes, state: StreamState, pieces: list[str] | None = None) -> list[str]:
    """The pieces chat_stream yields from this stream (into `pieces` as they come, if given)."""
    server, base_url = await serve_once(body)
    spec = EndpointSpec(name=f"sse-{id(body)}", kind="vllm", base_url=base_url, model_id="m", read_timeout_s=5.0)
    pieces = [] if pieces is None else pieces
    try:
        async for text in chat_stream(spec, MESSAGES, state, max_tokens=20, temperature=0.0):
            pieces.append(text)
    finally:
        server.close()
    return pieces


async def test_the_stream_skips_comments_and_other_fields_and_joins_multiline_data(settings: Any) -> None:
    settings.COACHING_LLM_ALLOW_REQUESTS = True
    body = (
        b": keep-alive\n\n"
        + b"event: message\nid: 1\n"
        + event(piece("One"))
        + b'data: {"choices": [{"index": 0,\ndata:  "delta": {"content": " two"}, "finish_reason": null}]}\n\n'
        + event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        + event({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 2}})
        + b"data: [DONE]\n\n"
    )
    state = StreamState()
    assert await stream_from(body, state) == ["One", " two"]
    assert (state.finish_reason, state.prompt_tokens, state.completion_tokens, state.chunks) == ("stop", 12, 2, 2)


async def test_an_error_event_mid_stream_is_a_transient_error_after_the_pieces_before_it(settings: Any) -> None:
    settings.COACHING_LLM_ALLOW_REQUESTS = True
    body = event(piece("Half")) + event({"error": {"message": "engine died", "code": 500}}) + event(piece(" more"))
    state = StreamState()
    pieces: list[str] = []
    with pytest.raises(LLMTransientError, match="engine died"):
        await stream_from(body, state, pieces)
    assert pieces == ["Half"]


@pytest.mark.parametrize("bad", [b"data: {not json\n\n", b"data: [1, 2]\n\n"])
async def test_a_chunk_that_is_not_a_json_object_is_a_transient_error(settings: Any, bad: bytes) -> None:
    settings.COACHING_LLM_ALLOW_REQUESTS = True
    with pytest.raises(LLMTransientError):
        await stream_from(event(piece("Ok")) + bad, StreamState())
