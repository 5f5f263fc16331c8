"""The one module that talks to model servers, through the `openai` package.

Clients are built lazily, cached per endpoint (and per event loop for the async client),
and never retry on their own: retries are bounded and decided by the pipeline, which
knows the turn's deadline. Every failure becomes one of the errors in `llm.errors`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import time
import weakref
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import openai
from django.conf import settings

from agents.llm import breaker
from agents.llm.control_tokens import neutralised_messages
from agents.llm.errors import LLMError, LLMPermanentError, LLMRequestsDisabled, LLMTransientError
from agents.llm.keys import api_key_env_problem
from agents.llm.observed import observed_completion, observed_stream

if TYPE_CHECKING:
    from agents.models import ModelEndpoint

# A client without a key is refused by the openai package; local servers ignore it.
PLACEHOLDER_API_KEY = "not-needed"


@dataclass(frozen=True)
class EndpointSpec:
    """The parts of a ModelEndpoint row a call needs; hashable, so clients can be cached."""

    name: str
    kind: str
    base_url: str
    model_id: str
    api_key_env: str = ""
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 120.0
    priority_scheduling: bool = False

    @classmethod
    def from_endpoint(cls, endpoint: ModelEndpoint) -> EndpointSpec:
        return cls(
            name=endpoint.name,
            kind=endpoint.kind,
            base_url=endpoint.base_url,
            model_id=endpoint.model_id,
            api_key_env=endpoint.api_key_env,
            connect_timeout_s=endpoint.connect_timeout_s,
            read_timeout_s=endpoint.read_timeout_s,
            priority_scheduling=endpoint.priority_scheduling,
        )

    @property
    def api_key(self) -> str:
        if self.api_key_env:
            # Again at call time: a row written around the model's validation (update(), raw
            # SQL, an older release) or a narrowed pattern must not send what it names.
            problem = api_key_env_problem(self.api_key_env)
            if problem is not None:
                raise LLMPermanentError(f"endpoint {self.name}: API-key variable refused: {problem}")
            return os.environ.get(self.api_key_env, "") or PLACEHOLDER_API_KEY
        return PLACEHOLDER_API_KEY


@dataclass
class Completion:
    content: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None


@dataclass
class StreamState:
    """Filled in while a stream is consumed: what the caller records once it ends."""

    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    first_token_at: float | None = None
    chunks: int = 0
    # Set once the server has answered the request's headers: it has the request and is
    # preparing the reply (chat.coach_stream.request_out waits for it).
    answered: asyncio.Event = field(default_factory=asyncio.Event)


def _check_allowed() -> None:
    if not settings.COACHING_LLM_ALLOW_REQUESTS:
        raise LLMRequestsDisabled("LLM requests are disabled (COACHING_LLM_ALLOW_REQUESTS is off)")


def _timeout(spec: EndpointSpec, timeout_s: float | None) -> openai.Timeout:
    read = spec.read_timeout_s if timeout_s is None else max(0.1, min(spec.read_timeout_s, timeout_s))
    return openai.Timeout(read, connect=min(spec.connect_timeout_s, read))


@functools.lru_cache(maxsize=32)
def _sync_client(base_url: str, api_key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)


_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], openai.AsyncOpenAI]] = (
    weakref.WeakKeyDictionary()
)


def _async_client(base_url: str, api_key: str) -> openai.AsyncOpenAI:
    # An httpx connection pool belongs to the loop that opened it.
    per_loop = _async_clients.setdefault(asyncio.get_running_loop(), {})
    key = (base_url, api_key)
    if key not in per_loop:
        per_loop[key] = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    return per_loop[key]


def translate_error(exc: Exception) -> LLMError:
    """Sort an openai exception into retryable or permanent."""
    if isinstance(exc, LLMError):
        return exc
    if isinstance(exc, openai.APITimeoutError):
        return LLMTransientError(f"model server timed out: {exc}")
    if isinstance(exc, openai.APIConnectionError):
        return LLMTransientError(f"model server unreachable: {exc}")
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code == 429 or exc.status_code >= 500:
            return LLMTransientError(f"model server answered {exc.status_code}")
        return LLMPermanentError(f"model server refused the request ({exc.status_code}): {exc.message}")
    if isinstance(exc, openai.OpenAIError):
        return LLMTransientError(f"model call failed: {exc}")
    return LLMTransientError(f"model call failed: {type(exc).__name__}: {exc}")


def is_health_failure(exc: BaseException) -> bool:
    """Does this failure say the endpoint is unwell (counts for its circuit breaker)?

    Timeouts, connection errors, a stream cut off mid-way and 5xx do; a 4xx (429 included:
    the server is up and pacing us) and anything about the content of an answer do not.
    """
    if isinstance(exc, LLMError):
        return isinstance(exc, LLMStreamTooSlow)
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code >= 500
    if isinstance(exc, openai.APIConnectionError):  # APITimeoutError is one too
        return True
    # Other openai errors are about the answer's shape; anything else is the transport
    # failing under the stream (a dropped connection, a protocol error).
    return not isinstance(exc, openai.OpenAIError)


class LLMStreamTooSlow(LLMTransientError):
    """The stream kept sending, but too slowly to finish within its time budget."""


def _request_kwargs(
    spec: EndpointSpec,
    messages: list[dict[str, str]],
    *,
    max_tokens: int,
    temperature: float,
    extra_body: Mapping[str, Any] | None,
    headers: Mapping[str, str] | None,
) -> dict[str, Any]:
    return {
        "model": spec.model_id,
        # The chat template's control tokens in a coachee's words stay words (control_tokens.py).
        "messages": neutralised_messages(messages),
        "max_tokens": max_tokens,
        "temperature": temperature,
        "extra_body": dict(extra_body or {}),
        "extra_headers": dict(headers or {}),
    }


@observed_completion  # metrics and the `chat {model}` span (agents/llm/observed.py)
def chat_complete(
    spec: EndpointSpec,
    messages: list[dict[str, str]],
    *,
    max_tokens: int,
    temperature: float,
    response_format: dict[str, Any] | None = None,
    frequency_penalty: float | None = None,
    extra_body: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
) -> Completion:
    """One blocking, non-streamed completion (Celery agents)."""
    _check_allowed()
    kwargs = _request_kwargs(
        spec, messages, max_tokens=max_tokens, temperature=temperature, extra_body=extra_body, headers=headers
    )
    if response_format is not None:
        kwargs["response_format"] = response_format
    if frequency_penalty is not None:
        kwargs["frequency_penalty"] = frequency_penalty
    circuit = breaker.for_endpoint(spec.name)
    circuit.before_call()
    try:
        response = _sync_client(spec.base_url, spec.api_key).chat.completions.create(
            **kwargs, timeout=_timeout(spec, timeout_s)
        )
    except Exception as exc:
        if is_health_failure(exc):
            circuit.record_failure()
        raise translate_error(exc) from exc
    circuit.record_success()
    if not response.choices:
        raise LLMTransientError("model server returned no choices")
    choice = response.choices[0]
    usage = response.usage
    return Completion(
        content=choice.message.content or "",
        finish_reason=choice.finish_reason,
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
    )


@observed_stream  # metrics, time to first token and the `chat {model}` span
async def chat_stream(
    spec: EndpointSpec,
    messages: list[dict[str, str]],
    state: StreamState,
    *,
    max_tokens: int,
    temperature: float,
    extra_body: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    circuit_checked: bool = False,
) -> AsyncIterator[str]:
    """Yield content pieces as the server streams them (Coach, in the ASGI process).

    Closing the generator (or cancelling its task) closes the upstream HTTP stream,
    which tells the server to stop generating. `circuit_checked`: the caller already asked
    the endpoint's breaker (before_call) in a worker thread, so the request goes out without
    another thread hop.
    """
    _check_allowed()
    kwargs = _request_kwargs(
        spec, messages, max_tokens=max_tokens, temperature=temperature, extra_body=extra_body, headers=headers
    )
    if spec.kind in ("vllm", "openai"):
        # llama-cpp-python's server does not know stream_options; it reports no usage then.
        kwargs["stream_options"] = {"include_usage": True}
    timeout = _timeout(spec, timeout_s)
    # The read timeout bounds each wait for the next chunk; this bounds the whole stream,
    # so a server trickling tokens cannot hold the reply past its deadline.
    budget_ends = time.monotonic() + (timeout.read or spec.read_timeout_s)
    circuit = breaker.for_endpoint(spec.name)
    if not circuit_checked:
        await asyncio.to_thread(circuit.before_call)
    request = _async_client(spec.base_url, spec.api_key).chat.completions.with_streaming_response.create(
        **kwargs, stream=True, timeout=timeout
    )
    try:
        # Leaving the block closes the HTTP stream: the server stops generating.
        async with request as response:
            state.answered.set()
            async for chunk in _stream_chunks(response):
                if time.monotonic() > budget_ends:
                    raise LLMStreamTooSlow("the model streamed too slowly to finish within its time budget")
                if usage := chunk.get("usage"):
                    state.prompt_tokens = usage.get("prompt_tokens")
                    state.completion_tokens = usage.get("completion_tokens")
                if not (choices := chunk.get("choices")):
                    continue
                choice = choices[0]
                if finish_reason := choice.get("finish_reason"):
                    state.finish_reason = finish_reason
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    if state.first_token_at is None:
                        state.first_token_at = time.time()
                    state.chunks += 1
                    yield piece
    except (asyncio.CancelledError, GeneratorExit):
        raise
    except Exception as exc:
        if is_health_failure(exc):
            await asyncio.to_thread(circuit.record_failure)
        raise translate_error(exc) from exc
    await asyncio.to_thread(circuit.record_success)


async def _stream_chunks(response: openai.AsyncAPIResponse[Any]) -> AsyncIterator[dict[str, Any]]:
    """The JSON chunks of a streamed chat completion (server-sent events), as plain dicts.

    The openai package's own stream builds a typed model of every chunk: ~100 us a token against
    ~5 us for json.loads (measured on a 2-core Xeon, mock transport). At 50 coachees streaming
    120 tokens/s each from a GPU that would be ~0.6 of a core (arithmetic, not measured on a GPU),
    on the event loop every socket of the process shares.
    """
    data: list[str] = []
    async for line in response.iter_lines():
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
            continue
        if line or not data:
            continue  # an event's other fields (event:, id:) or a comment (": ping")
        payload, data = "\n".join(data), []
        if payload == "[DONE]":
            return
        chunk = json.loads(payload)
        if not isinstance(chunk, dict):
            raise LLMTransientError("model server streamed a chunk that is not a JSON object")
        if error := chunk.get("error"):  # a server failing mid-stream (vLLM, OpenAI)
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise openai.APIError(f"model server failed mid-stream: {message}", response.http_request, body=error)
        yield chunk


def list_models(spec: EndpointSpec, *, timeout_s: float = 5.0) -> list[str]:
    """Model ids the server offers (the admin's connection test and the run script use it)."""
    _check_allowed()
    try:
        page = _sync_client(spec.base_url, spec.api_key).models.list(timeout=_timeout(spec, timeout_s))
    except Exception as exc:
        raise translate_error(exc) from exc
    return [model.id for model in page.data]
