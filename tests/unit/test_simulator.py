"""Tests for the simulated OpenAI-compatible LLM server; they use no Django themselves."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import date, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import httpx
import openai
import pytest
from pydantic import BaseModel, Field

from agents.llm.simulator.control import SimulatorControl
from agents.llm.simulator.faker import SchemaFaker
from agents.llm.simulator.server import SimulatorServer, start_simulator_process, stop_simulator_process
from agents.llm.simulator.tokens import messages_sha, token_pieces

pytestmark = pytest.mark.timeout(60)

MESSAGES: list[Any] = [
    {"role": "system", "content": "You are a coach."},
    {"role": "user", "content": "I feel tense before my talk, what now?"},
]
VOCABULARY = {
    "you",
    "notice",
    "the",
    "breath",
    "and",
    "let",
    "your",
    "shoulders",
    "soften",
    "as",
    "each",
    "small",
    "step",
    "builds",
    "steady",
    "focus",
    "so",
    "keep",
    "going",
    "with",
    "calm",
    "curiosity",
    "today",
}


class Mood(StrEnum):
    calm = "calm"
    tense = "tense"
    curious = "curious"


class Skill(StrEnum):
    breathing = "breathing"
    posture = "posture"
    focus = "focus"
    pacing = "pacing"


class Step(BaseModel):
    title: str = Field(min_length=3, max_length=20)
    minutes: int = Field(ge=1, le=15)


class Plan(BaseModel):
    kind: Literal["plan"]
    mood: Mood
    intensity: int = Field(gt=0, lt=4)
    confidence: float = Field(ge=0, le=1)
    skills: list[Skill] = Field(min_length=2, max_length=3)
    steps: list[Step] = Field(min_length=2, max_length=4)
    note: str | None = None
    day: date
    at: datetime
    done: bool


PLAN_FORMAT: Any = {
    "type": "json_schema",
    "json_schema": {"name": "Plan", "schema": Plan.model_json_schema(), "strict": False},
}


@pytest.fixture(scope="module")
def server() -> Iterator[SimulatorServer]:
    with SimulatorServer(port=0, ttft_ms=20, tokens_per_s=1000, output_tokens=12) as started:
        yield started


@pytest.fixture(autouse=True)
def _fresh(server: SimulatorServer) -> None:
    server.reset()


@pytest.fixture
def client(server: SimulatorServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sim", max_retries=0)


def _as(agent: str, turn: str | None = None) -> dict[str, str]:
    headers = {"X-Coaching-Agent": agent}
    if turn is not None:
        headers["X-Coaching-Turn"] = turn
    return headers


def _ask(client: openai.OpenAI, agent: str = "default", **kwargs: Any) -> Any:
    kwargs.setdefault("messages", MESSAGES)
    return client.chat.completions.create(model="sim-model", extra_headers=_as(agent), **kwargs)


def _wait_for(server: SimulatorServer, check: Callable[[list[dict[str, Any]]], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not check(server.calls()):
        assert time.monotonic() < deadline, f"condition not met; calls: {server.calls()}"
        time.sleep(0.02)


def test_health_models_and_tokenize(server: SimulatorServer, client: openai.OpenAI) -> None:
    root = server.base_url.removesuffix("/v1")
    assert httpx.get(root + "/health").json() == {"status": "ok"}
    assert [m.id for m in client.models.list().data] == ["sim-model"]
    text = "Hello, world!  A longwordthatkeepsgoing."
    assert "".join(token_pieces(text)) == text
    llama = httpx.post(root + "/tokenize", json={"content": text}).json()
    assert llama.keys() == {"tokens"}
    assert len(llama["tokens"]) == len(token_pieces(text)) == 8
    vllm = httpx.post(root + "/tokenize", json={"model": "m", "prompt": text}).json()
    assert vllm == {"tokens": llama["tokens"], "count": 8, "max_model_len": 32768}
    extras = httpx.post(root + "/extras/tokenize", json={"input": text}).json()
    assert extras == {"tokens": llama["tokens"]}
    chat = httpx.post(root + "/tokenize", json={"model": "m", "messages": MESSAGES}).json()
    usage = _ask(client).usage
    assert chat["count"] == usage.prompt_tokens > 10


def test_sync_non_stream(server: SimulatorServer, client: openai.OpenAI) -> None:
    response = _ask(client)
    content = response.choices[0].message.content
    assert response.object == "chat.completion"
    assert response.choices[0].finish_reason == "stop"
    assert len(token_pieces(content)) == 12
    assert content[0].isupper()
    assert content.endswith(".")
    assert response.usage.completion_tokens == 12
    assert response.usage.total_tokens == response.usage.prompt_tokens + 12
    [call] = server.calls()
    assert call["agent"] == "default"
    assert call["status"] == 200
    assert call["stream"] is False
    assert call["completion_tokens"] == 12
    assert call["response_format_type"] is None


def test_deterministic_per_call_index_with_variety(server: SimulatorServer, client: openai.OpenAI) -> None:
    first, second = (_ask(client).choices[0].message.content for _ in range(2))
    assert first != second
    server.reset()
    assert _ask(client).choices[0].message.content == first
    # Streaming call #0 of a fresh agent produces the same text as a non-streamed #0.
    streamed = "".join(c.choices[0].delta.content or "" for c in _ask(client, "other", stream=True))
    server.reset()
    assert streamed == _ask(client, "other").choices[0].message.content


def test_sync_stream_with_usage(server: SimulatorServer, client: openai.OpenAI) -> None:
    chunks = list(_ask(client, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    content_chunks = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content_chunks) == 12
    assert all(isinstance(c.model_extra["sim_emitted_at"], float) for c in content_chunks)
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == 12
    [call] = server.calls()
    assert call["stream"] is True
    assert call["finish_reason"] == "stop"
    assert not call["cancelled"]
    assert call["chunk_times"] == [c.model_extra["sim_emitted_at"] for c in content_chunks]


@pytest.mark.asyncio
async def test_async_client_stream_and_non_stream(server: SimulatorServer) -> None:
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="sim", max_retries=0) as aclient:
        stream = await aclient.chat.completions.create(
            model="sim-model",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
            extra_headers=_as("coach"),
        )
        chunks = [chunk async for chunk in stream]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        usage = chunks[-1].usage
        assert len(token_pieces(text)) == 12
        assert usage is not None
        assert usage.completion_tokens == 12
        response = await aclient.chat.completions.create(
            model="sim-model", messages=MESSAGES, extra_headers=_as("coach")
        )
        assert response.choices[0].finish_reason == "stop"
        assert response.choices[0].message.content != text
    assert [c["agent"] for c in server.calls()] == ["coach", "coach"]


def test_json_schema_from_pydantic_is_valid_and_varied(server: SimulatorServer, client: openai.OpenAI) -> None:
    plans = [
        Plan.model_validate_json(_ask(client, "synth", response_format=PLAN_FORMAT).choices[0].message.content)
        for _ in range(8)
    ]
    for plan in plans:
        assert len(set(plan.skills)) == len(plan.skills) == 2  # enum array items are distinct
        assert len(plan.steps) == 2
        assert plan.note is not None
    assert len({p.mood for p in plans}) > 1
    assert len({p.intensity for p in plans}) > 1
    assert {c["response_format_type"] for c in server.calls()} == {"json_schema"}


def test_parse_helper_with_strict_schema(client: openai.OpenAI) -> None:
    completion = client.chat.completions.parse(model="sim-model", messages=MESSAGES, response_format=Plan)
    parsed = completion.choices[0].message.parsed
    assert isinstance(parsed, Plan)
    assert parsed.kind == "plan"
    assert 1 <= parsed.intensity <= 3


def test_llamacpp_json_object_forms(server: SimulatorServer, client: openai.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {"score": {"type": "integer", "minimum": 7, "maximum": 9}},
        "required": ["score"],
    }
    content = _ask(client, response_format={"type": "json_object", "schema": schema}).choices[0].message.content
    assert json.loads(content)["score"] in (7, 8, 9)
    plain = json.loads(_ask(client, response_format={"type": "json_object"}).choices[0].message.content)
    assert plain["ok"] is True
    assert [c["response_format_type"] for c in server.calls()] == ["json_object", "json_object"]


def test_schema_faker_keywords() -> None:
    import random

    schema = {
        "$defs": {"Base": {"type": "object", "properties": {"a": {"const": 5}}, "required": ["a"]}},
        "type": "object",
        "properties": {
            "merged": {"allOf": [{"$ref": "#/$defs/Base"}, {"properties": {"b": {"type": "boolean"}}}]},
            "opt": {"anyOf": [{"type": "null"}, {"type": "string", "minLength": 30, "maxLength": 32}]},
            "odd": {"type": ["null", "integer"], "exclusiveMinimum": 10, "exclusiveMaximum": 12},
            "num": {"type": "number", "exclusiveMinimum": 0.1, "maximum": 0.1000001},
            "step": {"type": "integer", "minimum": 1, "maximum": 20, "multipleOf": 7},
            "fallback": {"default": [1, 2]},
            "when": {"type": "string", "format": "date-time"},
            "many": {"type": "array", "items": {"enum": ["x", "y"]}, "minItems": 4, "maxItems": 5},
            "trio": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 3},
            "none": {"type": "array", "items": {"type": "string"}, "maxItems": 0},
            "tiny": {"type": "string", "maxLength": 2},
        },
    }
    value = SchemaFaker(schema, random.Random(1)).generate()
    assert value["merged"]["a"] == 5
    assert isinstance(value["merged"]["b"], bool)
    assert 30 <= len(value["opt"]) <= 32
    assert value["odd"] == 11
    assert 0.1 < value["num"] <= 0.1000001
    assert value["step"] in (7, 14)
    assert value["fallback"] == [1, 2]
    assert datetime.fromisoformat(value["when"]).tzinfo is not None
    assert len(value["many"]) == 4
    assert set(value["many"]) <= {"x", "y"}
    assert sorted(value["trio"]) == ["a", "b", "c"]  # distinct enum values when possible
    assert value["none"] == []
    assert len(value["tiny"]) <= 2


def test_scripted_outputs_then_fallback(server: SimulatorServer, client: openai.OpenAI) -> None:
    server.configure(
        agents={"persona": {"script": ["first", {"a": 1}]}, "critic": {"script": ["again"], "repeat_last": True}}
    )
    persona = [_ask(client, "persona").choices[0].message.content for _ in range(3)]
    assert persona[:2] == ["first", '{"a": 1}']
    assert len(token_pieces(persona[2])) == 12
    assert [_ask(client, "critic").choices[0].message.content for _ in range(3)] == ["again"] * 3
    assert _ask(client, "coach").choices[0].message.content not in ("first", "again")
    assert [c["scripted"] for c in server.calls(agent="persona")] == [True, True, False]


def test_max_tokens_gives_length(server: SimulatorServer, client: openai.OpenAI) -> None:
    response = _ask(client, max_tokens=5)
    assert response.choices[0].finish_reason == "length"
    assert response.usage.completion_tokens == 5
    assert len(token_pieces(response.choices[0].message.content)) == 5
    chunks = list(_ask(client, stream=True, max_completion_tokens=3))
    assert sum(1 for c in chunks if c.choices[0].delta.content) == 3
    assert chunks[-1].choices[0].finish_reason == "length"
    server.configure(agents={"persona": {"script": ["short"]}})
    assert _ask(client, "persona", max_tokens=5).choices[0].finish_reason == "stop"


def test_http_error_faults(server: SimulatorServer, client: openai.OpenAI) -> None:
    server.configure(
        agents={
            "critic": {"fault": "http_500", "fault_times": 1},
            "synth": {"fault": "http_429"},
            "shadow": {"fault": "http_400"},
        }
    )
    with pytest.raises(openai.InternalServerError):
        _ask(client, "critic")
    assert _ask(client, "critic").choices[0].finish_reason == "stop"  # only the first call fails
    with pytest.raises(openai.RateLimitError) as rate_limited:
        _ask(client, "synth")
    assert rate_limited.value.response.headers["retry-after"] == "0"
    with pytest.raises(openai.BadRequestError) as bad:
        _ask(client, "shadow")
    assert bad.value.status_code == 400
    assert "http_400" in bad.value.message
    assert [(c["agent"], c["status"], c["fault"]) for c in server.calls()] == [
        ("critic", 500, "http_500"),
        ("critic", 200, None),
        ("synth", 429, "http_429"),
        ("shadow", 400, "http_400"),
    ]


def test_timeout_fault_fires_client_timeout(server: SimulatorServer, client: openai.OpenAI) -> None:
    server.configure(agents={"coach": {"fault": "timeout", "delay_s": 5}})
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        _ask(client, "coach", timeout=0.5)
    assert time.monotonic() - started < 2
    _wait_for(server, lambda calls: calls[0]["cancelled"])
    assert server.calls()[0]["status"] is None  # not a byte was sent


def test_hang_sends_role_then_nothing(server: SimulatorServer, client: openai.OpenAI) -> None:
    server.configure(agents={"coach": {"fault": "hang"}})
    stream = _ask(client, "coach", stream=True, timeout=0.5)
    assert next(stream).choices[0].delta.role == "assistant"
    with pytest.raises(openai.APITimeoutError):
        next(stream)
    _wait_for(server, lambda calls: calls[0]["cancelled"])
    assert server.calls()[0]["completion_tokens"] == 0


def test_truncated_and_invalid_json(server: SimulatorServer, client: openai.OpenAI) -> None:
    server.configure(agents={"synth": {"fault": "truncated_json"}, "critic": {"fault": "invalid_json"}})
    truncated = _ask(client, "synth", response_format=PLAN_FORMAT)
    assert truncated.choices[0].finish_reason == "length"
    with pytest.raises(json.JSONDecodeError):
        json.loads(truncated.choices[0].message.content)
    chunks = list(_ask(client, "synth", stream=True, response_format=PLAN_FORMAT))
    assert chunks[-1].choices[0].finish_reason == "length"
    with pytest.raises(json.JSONDecodeError):
        json.loads("".join(c.choices[0].delta.content or "" for c in chunks))
    invalid = _ask(client, "critic", response_format=PLAN_FORMAT)
    assert invalid.choices[0].finish_reason == "stop"
    with pytest.raises(json.JSONDecodeError):
        json.loads(invalid.choices[0].message.content)


def test_nonsense_is_schema_valid_gibberish(server: SimulatorServer, client: openai.OpenAI) -> None:
    server.configure(agents={"critic": {"fault": "nonsense"}})
    plan = Plan.model_validate_json(_ask(client, "critic", response_format=PLAN_FORMAT).choices[0].message.content)
    words = {w for text in [plan.note or "", *(s.title for s in plan.steps)] for w in text.split()}
    assert words
    assert not words & VOCABULARY
    assert server.calls()[0]["fault"] == "nonsense"


def test_slow_stream(server: SimulatorServer, client: openai.OpenAI) -> None:
    server.configure(agents={"plasticity": {"fault": "slow_stream", "slow_tokens_per_s": 20, "output_tokens": 4}})
    list(_ask(client, "plasticity", stream=True))
    times = server.calls()[0]["chunk_times"]
    assert len(times) == 4
    # Token i is due 20 ms (ttft) + i / 20 s after arrival; a late chunk never makes later ones early.
    received = server.calls()[0]["received_at"]
    assert all(t - received >= 0.02 + i * 0.05 - 0.002 for i, t in enumerate(times)), times


def test_drop_closes_connection(server: SimulatorServer, client: openai.OpenAI) -> None:
    server.configure(agents={"stability": {"fault": "drop", "drop_after_tokens": 2}})
    stream = _ask(client, "stability", stream=True)
    received = [next(stream) for _ in range(3)]  # role + 2 tokens
    assert all(c.choices[0].delta.content for c in received[1:])
    assert all(c.choices[0].finish_reason is None for c in received)
    with pytest.raises(openai.APIConnectionError):
        next(stream)
    with pytest.raises(openai.APIConnectionError):
        _ask(client, "stability")
    assert [c["finish_reason"] for c in server.calls()] == [None, None]


def test_call_log_and_timing(server: SimulatorServer, client: openai.OpenAI) -> None:
    server.configure(agents={"persona": {"ttft_ms": 150, "tokens_per_s": 50, "output_tokens": 5}})
    stream = client.chat.completions.create(
        model="sim-model", messages=MESSAGES, stream=True, extra_headers=_as("persona", "12")
    )
    list(stream)
    _ask(client, "persona")
    [call] = server.calls(agent="persona", turn=12)
    assert call["turn"] == "12"
    assert call["messages_sha"] == messages_sha(MESSAGES)
    assert call["first_token_at"] - call["received_at"] >= 0.15
    assert len(call["chunk_times"]) == 5
    assert call["chunk_times"] == sorted(call["chunk_times"])
    # Deadlines are absolute: token i is due ttft + i / rate after arrival.
    due = [0.15 + i / 50 - 0.002 for i in range(5)]
    assert all(t - call["received_at"] >= d for t, d in zip(call["chunk_times"], due, strict=True))
    assert call["finished_at"] >= call["chunk_times"][-1]
    assert call["finish_reason"] == "stop"
    assert call["prompt_tokens"] > 0
    assert call["completion_tokens"] == 5
    assert call["status"] == 200
    plain = server.calls(agent="persona")[1]
    assert plain["turn"] is None
    assert plain["finished_at"] - plain["received_at"] >= 0.15 + 5 / 50
    assert server.calls(agent="coach") == []


def test_client_disconnect_is_recorded(server: SimulatorServer, client: openai.OpenAI) -> None:
    server.configure(agents={"coach": {"tokens_per_s": 20, "output_tokens": 60}})
    stream = _ask(client, "coach", stream=True)
    for _ in range(3):
        next(stream)
    stream.close()
    _wait_for(server, lambda calls: calls[0]["cancelled"])
    call = server.calls()[0]
    assert call["finish_reason"] is None
    assert call["completion_tokens"] < 20


def test_jitter_varies_delays(server: SimulatorServer, client: openai.OpenAI) -> None:
    server.configure(agents={"shadow": {"ttft_ms": 100, "jitter": 0.9, "tokens_per_s": 0, "output_tokens": 1}})
    for _ in range(4):
        _ask(client, "shadow")
    ttfts = [c["first_token_at"] - c["received_at"] for c in server.calls()]
    assert all(0.005 <= t <= 0.4 for t in ttfts), ttfts
    assert max(ttfts) - min(ttfts) > 0.03, ttfts


@pytest.mark.asyncio
async def test_concurrent_requests_are_served_concurrently(server: SimulatorServer) -> None:
    server.configure(default={"ttft_ms": 500, "output_tokens": 3})
    async with openai.AsyncOpenAI(base_url=server.base_url, api_key="sim", max_retries=0) as aclient:
        started = time.monotonic()
        results = await asyncio.gather(
            *(
                aclient.chat.completions.create(model="sim-model", messages=MESSAGES, extra_headers=_as(f"a{i}"))
                for i in range(10)
            )
        )
        elapsed = time.monotonic() - started
    assert 0.5 <= elapsed < 3
    assert all(r.choices[0].finish_reason == "stop" for r in results)
    assert len(server.calls()) == 10


def test_config_validation(server: SimulatorServer) -> None:
    with pytest.raises(ValueError, match="unknown profile key"):
        server.configure(agents={"coach": {"ttft": 3}})
    with pytest.raises(ValueError, match="unknown fault"):
        server.configure(default={"fault": "explode"})
    response = httpx.post(server.base_url.removesuffix("/v1") + "/_sim/config", json={"default": {"jitter": 2}})
    assert response.status_code == 400
    config = server.configure(default={"output_tokens": 3}, agents={"coach": {"times": 2, "fault": "http_500"}})
    assert config["default"]["output_tokens"] == 3
    assert config["agents"]["coach"]["fault_times"] == 2


def test_subprocess_server_with_control() -> None:
    proc, base_url = start_simulator_process(0, ttft_ms=5, tokens_per_s=2000, output_tokens=6)
    try:
        with SimulatorControl(base_url) as control:
            assert control.health()
            control.configure(agents={"critic": {"script": [{"verdict": "ok"}]}})
            remote = openai.OpenAI(base_url=base_url, api_key="sim", max_retries=0)
            response = remote.chat.completions.create(
                model="sim-model", messages=MESSAGES, extra_headers=_as("critic", "7")
            )
            assert json.loads(response.choices[0].message.content or "") == {"verdict": "ok"}
            [call] = control.calls(agent="critic", turn=7)
            assert call["scripted"] is True
            assert call["received_at"] <= time.time()
            with pytest.raises(ValueError, match="unknown profile key 'bogus'"):
                control.configure(default={"bogus": 1})
            control.reset()
            assert control.calls() == []
    finally:
        stop_simulator_process(proc)
    assert proc.returncode is not None


def test_module_does_not_import_django() -> None:
    code = (
        "import importlib, pkgutil, sys, agents.llm.simulator as sim\n"
        "for module in pkgutil.iter_modules(sim.__path__, sim.__name__ + '.'):\n"
        "    importlib.import_module(module.name)\n"
        "assert not any(m.startswith('django') for m in sys.modules)"
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 0, result.stderr
