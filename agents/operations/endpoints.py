"""Model endpoints as operators check them: the connection test (list the models, time a tiny
completion, read vLLM's queue) and which agents share an endpoint."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import httpx
import openai
from prometheus_client.parser import text_string_to_metric_families

from agents.llm.client import EndpointSpec, chat_complete, list_models
from agents.llm.errors import LLMTransientError
from agents.llm.schema import extra_body_for
from agents.models import AgentConfig, EndpointKind, ModelEndpoint
from agents.operations.audit import User, audit
from agents.operations.errors import short_error

# The connection test must answer quickly even when the server does not.
TEST_CONNECT_TIMEOUT_S = 3.0
TEST_LIST_TIMEOUT_S = 5.0
TEST_COMPLETION_TIMEOUT_S = 15.0
TEST_METRICS_TIMEOUT_S = 2.0
TEST_PROMPT = [{"role": "user", "content": "Reply with the single word: ready"}]
TEST_MAX_TOKENS = 8


class Verdict:
    """What the operator is told first: can the agents use this server now?"""

    READY = "ready"  # it answered the completion
    BUSY = "busy"  # it is up (answered the listing) but the completion queued past the wait, or 429/503
    DOWN = "down"  # it could not be reached at all
    FAILING = "failing"  # it is up but refuses or errs: configuration, model name, server error


@dataclass
class ServerLoad:
    """vLLM's own view of its queue (`/metrics` at the server root), when it offers one."""

    running: int
    waiting: int


@dataclass
class ConnectionResult:
    """What the connection test found; never an exception."""

    endpoint_id: int | None
    endpoint_name: str
    base_url: str
    model_id: str
    models: list[str] = field(default_factory=list)
    list_ms: int | None = None
    list_error: str = ""
    completion_ms: int | None = None
    completion_text: str = ""
    completion_tokens: int | None = None
    completion_error: str = ""
    completion_queued: bool = False  # it failed by timing out or by 429/503: a queue, not a fault
    unreachable: bool = False  # the listing could not connect or got no answer at all
    load: ServerLoad | None = None

    @property
    def listed(self) -> bool:
        return not self.list_error

    @property
    def model_listed(self) -> bool:
        return self.model_id in self.models

    @property
    def completed(self) -> bool:
        return self.completion_ms is not None and not self.completion_error

    @property
    def ok(self) -> bool:
        return self.completed

    @property
    def verdict(self) -> str:
        if self.completed:
            return Verdict.READY
        if not self.listed:
            return Verdict.DOWN if self.unreachable else Verdict.FAILING
        if self.completion_queued or (self.load is not None and self.load.waiting > 0):
            return Verdict.BUSY
        return Verdict.FAILING

    @property
    def verdict_text(self) -> str:
        queue = ""
        if self.load is not None:
            queue = f" (the server reports {self.load.running} requests running, {self.load.waiting} waiting)"
        return {
            Verdict.READY: "ready: it answered" + queue,
            Verdict.BUSY: "busy: the server is up but did not get to the request in time" + queue,
            Verdict.DOWN: "down: the server could not be reached",
            Verdict.FAILING: "failing: the server is up but the request failed" + queue,
        }[self.verdict]

    @property
    def summary(self) -> str:
        parts = [self.verdict_text]
        if self.listed:
            found = "listed" if self.model_listed else "NOT listed"
            parts.append(f"{len(self.models)} models in {self.list_ms} ms ({self.model_id} {found})")
        else:
            parts.append(f"listing models failed: {self.list_error}")
        if self.completed:
            parts.append(f"a {self.completion_tokens or '?'}-token completion took {self.completion_ms} ms")
        else:
            parts.append(f"completion failed: {self.completion_error}")
        return "; ".join(parts)


def server_load(base_url: str, *, timeout_s: float = TEST_METRICS_TIMEOUT_S) -> ServerLoad | None:
    """Requests running and waiting, from a vLLM server's Prometheus `/metrics` (summed over its
    model and engine labels); None where the server has no such page or it cannot be read."""
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        response = httpx.get(f"{root}/metrics", timeout=timeout_s, follow_redirects=False)
        response.raise_for_status()
        totals = {"vllm:num_requests_running": 0.0, "vllm:num_requests_waiting": 0.0}
        found = False
        for family in text_string_to_metric_families(response.text):
            for sample in family.samples:
                if sample.name in totals:
                    totals[sample.name] += sample.value
                    found = True
    except (httpx.HTTPError, ValueError):
        return None
    if not found:
        return None
    return ServerLoad(int(totals["vllm:num_requests_running"]), int(totals["vllm:num_requests_waiting"]))


def _queued(exc: BaseException) -> bool:
    """A failure that says the server is there but has not got to us: a timeout, 429 or 503."""
    cause = exc.__cause__ or exc
    if isinstance(cause, openai.APITimeoutError):
        return True
    return isinstance(cause, openai.APIStatusError) and cause.status_code in (429, 503)


def endpoint_test_connection(endpoint: ModelEndpoint, *, user: User | None = None) -> ConnectionResult:
    """List the server's models and time one tiny completion, each with a short timeout.
    Never raises: every failure is in the result. An endpoint not marked trusted is not asked
    at all: the request would carry its API key."""
    result = ConnectionResult(endpoint.pk, endpoint.name, endpoint.base_url, endpoint.model_id)
    if not endpoint.trusted_for_coachee_data:
        result.list_error = "not tested: this endpoint is not marked trusted by a platform administrator"
        result.completion_error = "skipped"
        audit(user, endpoint, f"Connection test refused: {result.list_error}.")
        return result
    try:
        spec = dataclasses.replace(
            EndpointSpec.from_endpoint(endpoint),
            connect_timeout_s=min(endpoint.connect_timeout_s or TEST_CONNECT_TIMEOUT_S, TEST_CONNECT_TIMEOUT_S),
            read_timeout_s=TEST_COMPLETION_TIMEOUT_S,
        )
        started = time.monotonic()
        try:
            result.models = list_models(spec, timeout_s=TEST_LIST_TIMEOUT_S)
            result.list_ms = int((time.monotonic() - started) * 1000)
        except Exception as exc:
            result.list_error = short_error(exc)
            # A server that cannot be reached will not complete either: spare the second wait.
            result.unreachable = isinstance(exc, LLMTransientError)
        if result.unreachable:
            result.completion_error = "skipped: the server did not answer"
        else:
            started = time.monotonic()
            try:
                completion = chat_complete(
                    spec,
                    TEST_PROMPT,
                    max_tokens=TEST_MAX_TOKENS,
                    temperature=0.0,
                    extra_body=extra_body_for(spec.kind, thinking=False),
                    headers={"X-Coaching-Agent": "connection-test"},
                    timeout_s=TEST_COMPLETION_TIMEOUT_S,
                )
                result.completion_ms = int((time.monotonic() - started) * 1000)
                result.completion_text = completion.content[:200]
                result.completion_tokens = completion.completion_tokens
            except Exception as exc:
                result.completion_error = short_error(exc)
                result.completion_queued = _queued(exc)
            if spec.kind == EndpointKind.VLLM:
                result.load = server_load(spec.base_url)
    except Exception as exc:  # a malformed endpoint row: report it, do not raise
        result.list_error = result.list_error or short_error(exc)
        result.completion_error = result.completion_error or "skipped"
    try:
        audit(user, endpoint, f"Tested the connection: {'OK' if result.ok else 'FAILED'}; {result.summary}.")
    except Exception as exc:  # the audit must not turn a report into an error page
        result.completion_error = result.completion_error or f"(not recorded in the log: {exc})"
    return result


def agents_sharing(endpoint: ModelEndpoint) -> list[AgentConfig]:
    return list(AgentConfig.objects.filter(endpoint=endpoint).order_by("agent"))
