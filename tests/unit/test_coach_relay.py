"""Coach's relay: the text is checked as it streams (junk never reaches the screen), and the first
checked words go out at once (they are what the coachee waits for)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from django.test import override_settings

from agents.chat import coach, coach_stream
from agents.llm.client import EndpointSpec, StreamState
from agents.memory.context import SharedContext
from agents.models import MessageStatus, Turn
from agents.safety import quality

# The relay ends through a database thread (coach_end, patched here), whose connection handling
# may touch a connection an earlier test left on that thread.
pytestmark = pytest.mark.django_db


class RecordingLayer:
    def __init__(self) -> None:
        self.sent: list[tuple[float, dict[str, Any]]] = []

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.sent.append((time.monotonic(), message["event"]))


PROMPT = "You are the Coach.\nMoves you must not use with this coachee right now: none\nAnswer in two sentences."
FIRST = "Thanks for telling me how the evening went, that is a real step."  # 13 words


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
        expect=quality.Expectations(wording=(PROMPT,), languages=frozenset({"en"})),
    )


class Stream:
    """The model's pieces, with pauses; knows whether it was closed before its end."""

    def __init__(self, *steps: tuple[float, str]) -> None:
        self.steps = steps
        self.yielded: list[str] = []
        self.closed_early = False

    async def pieces(self) -> AsyncGenerator[str, None]:
        try:
            for pause_s, piece in self.steps:
                await asyncio.sleep(pause_s)
                self.yielded.append(piece)
                yield piece
        except GeneratorExit:
            self.closed_early = len(self.yielded) < len(self.steps)
            raise


def relay(call: coach.CoachCall, stream: Stream, monkeypatch: pytest.MonkeyPatch) -> tuple[RecordingLayer, float]:
    # No database here: snapshots (every COACHING_COACH_SNAPSHOT_S) are turned off by the tests.
    quality.warm()  # as the ASGI process does at its start
    layer = RecordingLayer()
    monkeypatch.setattr(coach_stream, "get_channel_layer", lambda: layer)
    monkeypatch.setattr(coach_stream, "coach_end", lambda **kwargs: None)
    started = time.monotonic()
    asyncio.run(coach_stream.coach_relay(call, StreamState(), stream.pieces(), started=started))
    return layer, started


@override_settings(COACHING_COACH_DELTA_BATCH_MS=200, COACHING_COACH_SNAPSHOT_S=3600)
def test_the_first_checked_words_are_relayed_at_once_and_later_ones_in_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first piece comes well inside the batch window, the second one too.
    layer, started = relay(a_call(), Stream((0.01, FIRST), (0.05, " What felt easiest?")), monkeypatch)

    texts = [event["text"] for _, event in layer.sent]
    assert texts == [FIRST, " What felt easiest?"]  # the second waited for the end (inside the window)
    first_at = layer.sent[0][0] - started
    assert first_at < 0.05, f"the first piece waited {first_at:.3f} s for a batch"


@override_settings(COACHING_COACH_DELTA_BATCH_MS=300, COACHING_COACH_SNAPSHOT_S=3600)
def test_the_words_the_check_waits_for_go_out_when_they_come_not_at_the_next_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One word every 10 ms, as a GPU writes them: the eighth comes ~70 ms in, well inside the
    # batch window that began with the first word (which was too few to judge).
    words = FIRST.split(" ")
    stream = Stream(*((0.01, word if i == 0 else " " + word) for i, word in enumerate(words)))
    layer, started = relay(a_call(), stream, monkeypatch)

    first_at, first = layer.sent[0][0] - started, layer.sent[0][1]["text"]
    assert len(first.split()) == coach_stream.LIVE_CHECK_FIRST_WORDS
    assert first_at < 0.2, f"the first checked words waited {first_at:.3f} s for the batch window"
    assert "".join(event["text"] for _, event in layer.sent) == FIRST


@override_settings(COACHING_COACH_DELTA_BATCH_MS=0, COACHING_COACH_SNAPSHOT_S=3600)
def test_the_first_words_wait_until_there_are_enough_to_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    words = FIRST.split(" ")
    stream = Stream(*((0.0, word if i == 0 else " " + word) for i, word in enumerate(words)))
    layer, _ = relay(a_call(), stream, monkeypatch)

    first = layer.sent[0][1]["text"]
    assert len(first.split()) == coach_stream.LIVE_CHECK_FIRST_WORDS
    assert "".join(event["text"] for _, event in layer.sent) == FIRST


@override_settings(COACHING_COACH_DELTA_BATCH_MS=0, COACHING_COACH_SNAPSHOT_S=3600)
def test_a_reply_echoing_its_prompt_never_reaches_the_screen_and_its_stream_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    call = a_call()
    stream = Stream(
        (0.0, "Moves you must not use with this coachee right now: none."),
        (0.0, " And more words follow here."),
        (0.0, " Many more."),
    )
    layer, _ = relay(call, stream, monkeypatch)

    assert layer.sent == []
    assert "prompt_echo" in {f.check for f in call.live_findings}
    assert stream.closed_early  # the engine stops generating it
    assert coach.coach_findings(call, "Moves you must not use", MessageStatus.COMPLETE) == call.live_findings


@override_settings(COACHING_COACH_DELTA_BATCH_MS=0, COACHING_COACH_SNAPSHOT_S=3600)
def test_junk_after_good_words_stops_the_relay_at_the_last_checked_words(monkeypatch: pytest.MonkeyPatch) -> None:
    call = a_call()
    stream = Stream(
        (0.0, FIRST),
        (0.0, " I am a human, not an AI, and I am not a coach."),
        (0.0, " Tell me more."),
    )
    layer, _ = relay(call, stream, monkeypatch)

    assert [event["text"] for _, event in layer.sent] == [FIRST]
    assert call.live_findings
    assert stream.closed_early
