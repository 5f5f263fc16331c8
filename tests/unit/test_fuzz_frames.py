"""Thousands of malformed WebSocket frames: each gets an error event, nothing is stored, no
model is called, and the socket stays usable."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings

from agents.models import Message, Turn
from agents.roles.schemas import SERVER_EVENTS
from tests.support.sockets import communicator, owned_session

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_thread_connections")]

FRAMES = 2000
ODD_TEXT = ["\u202e", "\u200b", "\ufeff", "\U0001f600" * 3, "\x00", "e\u0301", "\udfff", "\ud83d", "\\", '"']


def _deep(depth: int, opener: str, closer: str) -> str:
    return opener * depth + closer * depth


def malformed_frames(rng: random.Random) -> Iterator[str | bytes]:
    """Frames no valid client sends, in every family the issue names, seeded for repeatability."""
    big = settings.COACHING_MAX_FRAME_BYTES
    families: list[Any] = [
        lambda: rng.choice(["{", "}", "nul", "tru", "{'type': 'ping'}", "[1,]", '{"type":}', "<html>"]),
        lambda: json.dumps(rng.choice([None, True, 1, 1.5, "ping", [], [{"type": "ping"}]])),
        lambda: json.dumps({"type": rng.choice([1, None, [], {}, True, "PING", "user.messages", ""])}),
        lambda: json.dumps(
            {"type": "user.message", "client_id": rng.choice([1, None, "", "x" * 65, "a b", "é"]), "text": "hi"}
        ),
        lambda: json.dumps({"type": "user.message", "client_id": "ok", "text": rng.choice([1, None, [], {}, ""])}),
        lambda: json.dumps({"type": "resume", "after_seq": rng.choice([-1, "1", 1.5, None, [], 2**70])}),
        lambda: json.dumps({"type": "stop", rng.choice(["x", "turn", "seq"]): 1}),
        lambda: _deep(rng.randint(100, 20000), "[", "]"),
        lambda: '{"type": "ping", "x": ' + _deep(rng.randint(500, 5000), '{"a":', "}").replace("}}", "1}}", 1) + "}",
        lambda: rng.choice([" ", "\n", "\t", "  \r\n "]),
        lambda: json.dumps({"type": "user.message", "client_id": "big", "text": "x" * (big + rng.randint(1, 5000))}),
        lambda: rng.randbytes(rng.randint(1, 64)),
        lambda: json.dumps({"type": "user.message", "client_id": "odd", "text": rng.choice(ODD_TEXT[6:8])}),
        lambda: '{"type": "user.message", "client_id": "odd", "text": "\\ud800"}',
        lambda: json.dumps({"type": "user.message", "client_id": "ws", "text": rng.choice([" ", "\u200b\n", "\t"])}),
    ]
    for _ in range(FRAMES):
        yield rng.choice(families)()


async def test_2000_malformed_frames_each_get_an_error_and_change_nothing(
    seeded_tx: None,
    no_pipeline: list[int],
) -> None:
    user, session = await owned_session()
    comm = communicator(user, session.pk)
    connected, _ = await comm.connect()
    assert connected
    codes: dict[str, int] = {}
    try:
        for frame in malformed_frames(random.Random(20261130)):
            if isinstance(frame, bytes):
                await comm.send_to(bytes_data=frame)
            else:
                await comm.send_to(text_data=frame)
            try:
                event = await comm.receive_json_from(timeout=5)
            except TimeoutError:
                pytest.fail(f"no answer to {frame!r:.120}")
            assert event["type"] == "error", (repr(frame)[:80], event)
            SERVER_EVENTS["error"].model_validate(event)
            codes[event["code"]] = codes.get(event["code"], 0) + 1
        # Still usable afterwards.
        await comm.send_json_to({"type": "ping"})
        assert await comm.receive_json_from(timeout=5) == {"type": "pong"}
    finally:
        await comm.disconnect()
    assert sum(codes.values()) == FRAMES
    assert set(codes) <= {
        "invalid_frame",
        "frame_too_large",
        "binary_not_supported",
        "empty_message",
        "unstorable_text",
    }
    assert no_pipeline == []
    assert await sync_to_async(Message.objects.count)() == 0
    assert await sync_to_async(Turn.objects.count)() == 0
