"""Findings 3-6 of the security probe (issue 20), over the real stack (Daphne started through
coaching_site.serve, a Celery worker, the simulator): cross-site WebSocket hijacking by origins
that differ only in scheme or port, text PostgreSQL cannot store, socket counts that leaked when
a consumer crashed, unknown socket paths answered with HTTP 500, and frames over the server's
maximum dropped without a close code."""

from __future__ import annotations

import asyncio
import json
from contextlib import suppress
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from agents.chat.consumers import ChatConsumer
from agents.chat.ws_guard import CLOSE_NOT_FOUND, CLOSE_ORIGIN_REFUSED, origin_allowed
from agents.models import Message
from agents.turns import limits
from agents.turns.sessions import session_start
from tests.support.people import make_coachee
from tests.support.stack import ChatClient, LiveStack, login_cookie

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(180),
    pytest.mark.usefixtures("close_thread_connections"),
]
CROSS_SITE = ["http://127.0.0.1:9999", "http://localhost:1234", "https://127.0.0.1", "null", "http://evil.example"]


async def coachee_with_history(stack: LiveStack, name: str = "coachee") -> tuple[Any, Any, str]:
    user = await sync_to_async(make_coachee)(name)
    session = await sync_to_async(session_start)(user_id=user.pk)
    cookie = await sync_to_async(login_cookie)(name, "pw-for-tests-1")
    async with ChatClient(stack, session, cookie) as client:
        await client.send({"type": "user.message", "client_id": "c-1", "text": "My private words."})
        await client.until(lambda e: e["type"] == "turn.done", timeout_s=60)
    return user, session, cookie


async def close_code(ws: Any, timeout_s: float = 10) -> tuple[int | None, str, list[str]]:
    """Read until the server closes: (code, reason, frames received before it)."""
    frames = []
    try:
        while True:
            frames.append(await asyncio.wait_for(ws.recv(), timeout_s))
    except ConnectionClosed as closed:
        rcvd = closed.rcvd
        return (rcvd.code if rcvd else None), (rcvd.reason if rcvd else ""), frames


@pytest.mark.parametrize("origin", CROSS_SITE)
async def test_a_page_of_another_origin_cannot_read_a_conversation(
    live_stack: LiveStack, live_sim: Any, origin: str
) -> None:
    _, session, cookie = await coachee_with_history(live_stack)
    url = f"{live_stack.ws_url}/ws/sessions/{session.pk}/"
    async with connect(url, origin=Origin(origin), additional_headers={"Cookie": cookie}) as ws:
        with suppress(ConnectionClosed):  # it may be closed before the frame goes out
            await ws.send(json.dumps({"type": "resume", "after_seq": 0}))
        code, _, frames = await close_code(ws)
    assert code == CLOSE_ORIGIN_REFUSED
    assert frames == []


async def test_the_own_origin_and_listed_origins_are_accepted_exactly(settings: Any) -> None:
    def scope(origin: str, host: str = "127.0.0.1:8000", scheme: str = "ws") -> dict[str, Any]:
        return {
            "type": "websocket",
            "scheme": scheme,
            "headers": [(b"host", host.encode()), (b"origin", origin.encode())],
        }

    settings.TRUSTED_ORIGINS = ["https://chat.example.org"]
    assert origin_allowed(scope("http://127.0.0.1:8000"))
    assert origin_allowed(scope("https://localhost", host="localhost", scheme="wss"))
    assert origin_allowed(scope("https://chat.example.org"))
    assert origin_allowed(scope("https://chat.example.org:443"))
    for origin in ["http://127.0.0.1:8001", "https://127.0.0.1:8000", "http://chat.example.org", "", "null"]:
        assert not origin_allowed(scope(origin)), origin
    # A Host outside ALLOWED_HOSTS is no one's own origin.
    assert not origin_allowed(scope("http://evil.example:8000", host="evil.example:8000"))
    assert settings.CSRF_TRUSTED_ORIGINS is not None


async def test_unstorable_text_gets_an_error_and_nothing_leaks(live_stack: LiveStack, live_sim: Any) -> None:
    user = await sync_to_async(make_coachee)()
    session = await sync_to_async(session_start)(user_id=user.pk)
    cookie = await sync_to_async(login_cookie)("coachee", "pw-for-tests-1")
    frames = [
        '{"type": "user.message", "client_id": "n1", "text": "hi\\u0000there"}',
        '{"type": "user.message", "client_id": "n2", "text": "lone \\ud800 surrogate"}',
        '{"type": "user.message", "client_id": "n3", "text": "\\udfff at the start"}',
    ]
    # More rounds than the per-user socket limit: each leaked count used to stay for an hour.
    for _ in range(settings.COACHING_MAX_SOCKETS_PER_USER + 2):
        async with ChatClient(live_stack, session, cookie) as client:
            for frame in frames:
                await client.send(frame)
                event = await client.next_event(10)
                assert (event["type"], event["code"]) == ("error", "unstorable_text"), event
            await client.send({"type": "ping"})
            assert (await client.next_event(10))["type"] == "pong"
    assert await sync_to_async(Message.objects.filter(session=session).count)() == 0
    await asyncio.sleep(0.5)
    assert await sync_to_async(limits.sockets_open)(user_id=user.pk) == 0
    # Control characters other than NUL are stored as sent.
    async with ChatClient(live_stack, session, cookie) as client:
        await client.send({"type": "user.message", "client_id": "ok", "text": "tab\there \x01\x7f"})
        accepted = await client.until(lambda e: e["type"] == "message.accepted", timeout_s=10)
        assert accepted["text"] == "tab\there \x01\x7f"
        await client.until(lambda e: e["type"] == "turn.done", timeout_s=60)


@pytest.mark.parametrize("path", ["/ws/nope/", "/ws/sessions/abc/", "/", "/ws/sessions/1/extra/"])
async def test_unknown_socket_paths_are_closed_with_a_code_not_a_500(live_stack: LiveStack, path: str) -> None:
    async with connect(f"{live_stack.ws_url}{path}", origin=Origin(live_stack.http_url)) as ws:
        code, _, frames = await close_code(ws)
    assert (code, frames) == (CLOSE_NOT_FOUND, [])


async def test_a_frame_over_the_servers_maximum_gets_a_1009_close_with_a_reason(
    live_stack: LiveStack, live_sim: Any
) -> None:
    user = await sync_to_async(make_coachee)()
    session = await sync_to_async(session_start)(user_id=user.pk)
    cookie = await sync_to_async(login_cookie)("coachee", "pw-for-tests-1")
    async with ChatClient(live_stack, session, cookie) as client:
        await client.send({"type": "user.message", "client_id": "big", "text": "x" * (900 * 1024)})
        assert (await client.next_event(10))["code"] == "frame_too_large"
        await client.send({"type": "user.message", "client_id": "huge", "text": "x" * (1024 * 1024)})
        code, reason, _ = await close_code(client.ws)
    assert code == 1009
    assert "exceeds payload limit" in reason
    await asyncio.sleep(0.5)
    assert await sync_to_async(limits.sockets_open)(user_id=user.pk) == 0


# --- The socket count: released whatever ends a socket, or expired within a lease ---------------


async def test_a_crashed_consumer_gives_its_socket_back(seeded_tx: None, monkeypatch: pytest.MonkeyPatch) -> None:
    user = await sync_to_async(make_coachee)()
    session = await sync_to_async(session_start)(user_id=user.pk)

    async def crash(self: Any, message: dict[str, Any]) -> None:
        raise RuntimeError("a handler bug")

    monkeypatch.setattr(ChatConsumer, "pong_for_test", crash, raising=False)
    comm = WebsocketCommunicator(ChatConsumer.as_asgi(), f"/ws/sessions/{session.pk}/")
    comm.scope["user"] = user
    comm.scope["url_route"] = {"kwargs": {"session_id": session.pk}}
    connected, _ = await comm.connect()
    assert connected
    assert await sync_to_async(limits.sockets_open)(user_id=user.pk) == 1
    await comm.send_input({"type": "pong.for_test"})  # a group event whose handler raises
    with pytest.raises(RuntimeError, match="a handler bug"):
        await comm.wait(timeout=5)
    assert await sync_to_async(limits.sockets_open)(user_id=user.pk) == 0


def test_a_lease_nobody_renews_expires_within_a_minute(seeded: None, monkeypatch: pytest.MonkeyPatch) -> None:
    user = make_coachee()
    limit = settings.COACHING_MAX_SOCKETS_PER_USER
    assert all(limits.socket_open_allowed(user_id=user.pk, socket_id=f"dead-{i}") for i in range(limit))
    assert not limits.socket_open_allowed(user_id=user.pk, socket_id="one-more")
    now = limits.time.time()
    monkeypatch.setattr(limits.time, "time", lambda: now + limits.SOCKET_LEASE_S + 1)
    assert limits.sockets_open(user_id=user.pk) == 0
    assert limits.socket_open_allowed(user_id=user.pk, socket_id="fresh")
    assert limits.SOCKET_LEASE_S <= 60


# --- Generated input over every text field of the socket ----------------------------------------

SOCKET_VALUES = [
    "\\u0000",
    "a\\u0000b",
    "\\ud800",
    "x\\udfff",
    "\\ud83d\\u0041",
    "\\u0001\\u001b\\u007f\\u000b",
    "x" * (1024 * 1024),
]
FIELD_FRAMES = [
    '{{"type": "user.message", "client_id": "c", "text": "{v}"}}',
    '{{"type": "user.message", "client_id": "{v}", "text": "hello"}}',
    '{{"type": "resume", "after_seq": "{v}"}}',
    '{{"type": "{v}"}}',
    '{{"type": "ping", "{v}": 1}}',
    '{{"{v}": "user.message", "client_id": "c", "text": "hi"}}',
]


async def test_generated_input_over_every_socket_field_crashes_nothing_and_leaks_nothing(
    live_stack: LiveStack, live_sim: Any
) -> None:
    user = await sync_to_async(make_coachee)()
    session = await sync_to_async(session_start)(user_id=user.pk)
    cookie = await sync_to_async(login_cookie)("coachee", "pw-for-tests-1")
    log_before = live_stack.logs[1].read_text(errors="replace").count("Exception inside application")
    outcomes: dict[str, int] = {}
    client = await ChatClient(live_stack, session, cookie).__aenter__()
    try:
        for template in FIELD_FRAMES:
            for value in SOCKET_VALUES:
                await client.send(template.format(v=value))
                try:
                    event = await client.next_event(15)
                    outcome = f"error:{event.get('code')}" if event["type"] == "error" else event["type"]
                except ConnectionClosed as closed:
                    outcome = f"close:{closed.rcvd.code if closed.rcvd else None}"
                    client = await ChatClient(live_stack, session, cookie).__aenter__()
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
                assert outcome.startswith("error:") or outcome == "close:1009", (template, value[:20], outcome)
                if outcome == "close:1009":
                    assert len(value) > 1000
        await client.send({"type": "ping"})
        assert (await client.next_event(10))["type"] == "pong"
    finally:
        await client.__aexit__()
    assert sum(outcomes.values()) == len(FIELD_FRAMES) * len(SOCKET_VALUES)
    assert "error:server_error" not in outcomes
    assert await sync_to_async(Message.objects.filter(session=session).count)() == 0
    await asyncio.sleep(0.5)
    assert await sync_to_async(limits.sockets_open)(user_id=user.pk) == 0
    log_after = live_stack.logs[1].read_text(errors="replace").count("Exception inside application")
    assert log_after == log_before
