"""Coach's relay batches tokens, but never the first one: it is what the coachee waits for."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from django.test import override_settings

from agents.chat import coach
from agents.llm.client import EndpointSpec, StreamState
from agents.memory.context import SharedContext
from agents.models import Turn


class RecordingLayer:
    def __init__(self) -> None:
        self.sent: list[tuple[float, dict[str, Any]]] = []

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.sent.append((time.monotonic(), message["event"]))


def a_call() -> coach.CoachCall:
    return coach.CoachCall(
        turn_id=1,
        session_id=1,
        spec=EndpointSpec(name="sim", kind="openai", base_url="http://127.0.0.1:9/v1", model_id="m"),
        messages=[],
        max_tokens=64,
        temperature=0.7,
        extra_body={},
        deadline=time.time() + 60,
        run_inputs={},
        shared=SharedContext(text="", tokens=0, message_ids=[]),
        context_budget=1000,
        turn=Turn(),
        circuit_open=None,
        message_id=7,
    )


async def pieces(first_after_s: float, rest_after_s: float) -> AsyncIterator[str]:
    await asyncio.sleep(first_after_s)
    yield "Hello"
    await asyncio.sleep(rest_after_s)
    yield ", there."


@override_settings(COACHING_COACH_DELTA_BATCH_MS=200)
def test_the_first_piece_is_relayed_at_once_and_later_ones_in_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = RecordingLayer()
    monkeypatch.setattr(coach, "get_channel_layer", lambda: layer)
    monkeypatch.setattr(coach, "coach_end", lambda **kwargs: None)
    started = time.monotonic()
    # The first piece comes well inside the batch window, the second one too.
    asyncio.run(coach.coach_relay(a_call(), StreamState(), pieces(0.01, 0.05), started=started))

    texts = [event["text"] for _, event in layer.sent]
    assert texts == ["Hello", ", there."]  # the second waited for the end (inside the window)
    first_at = layer.sent[0][0] - started
    assert first_at < 0.05, f"the first piece waited {first_at:.3f} s for a batch"
