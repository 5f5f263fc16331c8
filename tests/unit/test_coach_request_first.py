"""Coach's request goes out before the turn's other first writes (its message and run rows, the
canvas's publish): they wait until the model server has the request, and no longer than
REQUEST_OUT_WAIT_S."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agents.chat import coach, coach_stream
from agents.llm.client import EndpointSpec, StreamState
from agents.llm.errors import LLMCircuitOpen, LLMTransientError
from agents.memory.context import SharedContext
from agents.models import Turn
from agents.turns import accept

# The writes run on database threads (patched here), whose connection handling may touch a
# connection an earlier test left on that thread.
pytestmark = pytest.mark.django_db(transaction=True)

SERVER_ANSWERS_AFTER_S = 0.03


def a_call(**overrides: Any) -> coach.CoachCall:
    fields: dict[str, Any] = {
        "turn_id": 1,
        "session_id": 1,
        "spec": EndpointSpec(name="sim", kind="openai", base_url="http://127.0.0.1:9/v1", model_id="m"),
        "messages": [],
        "max_tokens": 64,
        "temperature": 0.7,
        "extra_body": {},
        "deadline": time.time() + 60,
        "run_inputs": {},
        "shared": SharedContext(text="", tokens=0, message_ids=[]),
        "context_budget": 1000,
        "turn": Turn(),
        "circuit_open": None,
    }
    return coach.CoachCall(**(fields | overrides))


class Timeline:
    def __init__(self) -> None:
        self.started = time.monotonic()
        self.at: dict[str, float] = {}

    def mark(self, name: str) -> None:
        self.at.setdefault(name, time.monotonic() - self.started)


def a_model(timeline: Timeline, *, answers: bool = True, fails: bool = False) -> Any:
    """CoachCall.stream's stand-in: the server answers the request's headers after a moment
    (as chat_stream marks it), or never; then sends its first token a while later. Or the
    stream fails before any server answered (unreachable, no endpoint free in time)."""

    async def pieces(state: StreamState) -> AsyncIterator[str]:
        timeline.mark("request sent")
        await asyncio.sleep(SERVER_ANSWERS_AFTER_S)
        if fails:
            raise LLMTransientError("model server unreachable")
        if answers:
            timeline.mark("server has it")
            state.answered.set()
        await asyncio.sleep(0.3)
        yield "Hello."

    return lambda self: pieces(self.state)


def run_turn(
    monkeypatch: pytest.MonkeyPatch, call: coach.CoachCall, timeline: Timeline, model: Any | None = None
) -> None:
    """coach_run and the canvas's start, as the consumer spawns them (`model`: the stream's
    stand-in; None: the real one)."""
    if model is not None:
        monkeypatch.setattr(coach.CoachCall, "stream", model)
    monkeypatch.setattr(coach_stream, "coach_record_start", lambda **kwargs: timeline.mark("run row written"))
    monkeypatch.setattr(accept, "pipeline_start", lambda **kwargs: timeline.mark("canvas queued"))
    monkeypatch.setattr(accept, "turn_canvas_after_coach", lambda **kwargs: None)

    async def nothing(*args: Any, **kwargs: Any) -> None:
        return None

    monkeypatch.setattr(coach_stream, "degraded_notice_if_open", nothing)
    monkeypatch.setattr(coach_stream, "coach_relay", nothing)

    async def both() -> None:
        await asyncio.gather(
            coach_stream.coach_run(call.turn_id, call), coach_stream.pipeline_start(call.turn_id, call)
        )

    asyncio.run(both())


def test_the_run_row_and_the_canvas_wait_until_the_server_has_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    timeline = Timeline()
    run_turn(monkeypatch, a_call(), timeline, a_model(timeline))

    at = timeline.at
    assert at["request sent"] < at["server has it"] <= at["run row written"]
    assert at["server has it"] <= at["canvas queued"]
    assert at["run row written"] - at["server has it"] < 0.2  # right after, not at the first token


def test_a_server_that_does_not_answer_holds_them_back_no_longer_than_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    timeline = Timeline()
    run_turn(monkeypatch, a_call(), timeline, a_model(timeline, answers=False))

    at = timeline.at
    for write in ("run row written", "canvas queued"):
        waited = at[write] - at["request sent"]
        assert coach_stream.REQUEST_OUT_WAIT_S * 0.9 <= waited < coach_stream.REQUEST_OUT_WAIT_S + 0.2, write


def test_a_stream_that_fails_before_any_server_answered_holds_nothing_back(monkeypatch: pytest.MonkeyPatch) -> None:
    timeline = Timeline()
    run_turn(monkeypatch, a_call(), timeline, a_model(timeline, fails=True))

    at = timeline.at
    for write in ("run row written", "canvas queued"):
        assert at[write] - at["request sent"] < SERVER_ANSWERS_AFTER_S + coach_stream.REQUEST_OUT_WAIT_S / 2, write


def test_an_open_breaker_holds_nothing_back(monkeypatch: pytest.MonkeyPatch) -> None:
    timeline = Timeline()
    started = time.monotonic()
    run_turn(monkeypatch, a_call(circuit_open=LLMCircuitOpen("sim is failing")), timeline)

    for write in ("run row written", "canvas queued"):
        assert timeline.at[write] < coach_stream.REQUEST_OUT_WAIT_S / 2, write
    assert time.monotonic() - started < 5
