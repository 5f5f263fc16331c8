"""The chat socket in-process: authentication, ownership, frame validation, idempotent sends."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import AnonymousUser

from agents.chat.consumers import CLOSE_FORBIDDEN, CLOSE_UNAUTHENTICATED
from agents.models import AgentRun, CoachingSession, Message, RunStatus, Turn
from agents.roles.schemas import SERVER_EVENTS
from agents.safety import evaluation, pregate
from agents.turns import accept, event_log
from tests.support.sockets import canvases_queued, communicator, owned_session
from tests.support.stack import stack_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_thread_connections")]


async def test_anonymous_is_refused(seeded_tx: None) -> None:
    _, session = await owned_session()
    comm = communicator(AnonymousUser(), session.pk)
    await comm.connect()
    closed = await comm.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}


async def test_another_coachees_session_is_refused(seeded_tx: None) -> None:
    _, session = await owned_session("alice")
    mallory, _ = await owned_session("mallory")
    comm = communicator(mallory, session.pk)
    await comm.connect()
    closed = await comm.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": CLOSE_FORBIDDEN}


BAD_FRAMES = [
    "not json",
    "   ",
    "[]",
    "42",
    '{"type": "user.message"}',
    '{"type": "user.message", "client_id": 5, "text": "hi"}',
    '{"type": "user.message", "client_id": "a b", "text": "hi"}',
    '{"type": "user.message", "client_id": "ok", "text": "hi", "extra": 1}',
    '{"type": "resume", "after_seq": -1}',
    '{"type": "resume", "after_seq": "3"}',
    '{"type": "launch.missiles"}',
    "[" * 5000 + "]" * 5000,
    '{"type": "ping", "x": ' + "[" * 2000 + "]" * 2000 + "}",
    json.dumps({"type": "user.message", "client_id": "big", "text": "x" * 20000}),
    '{"type": "user.message", "client_id": "u", "text": "\\ud800"}',
]


async def test_malformed_frames_get_errors_and_the_socket_stays_usable(seeded_tx: None, no_pipeline: list[int]) -> None:
    user, session = await owned_session()
    comm = communicator(user, session.pk)
    connected, _ = await comm.connect()
    assert connected
    try:
        for frame in BAD_FRAMES:
            await comm.send_to(text_data=frame)
            event = await comm.receive_json_from(timeout=5)
            assert event["type"] == "error", frame[:60]
            assert event["code"] in {"invalid_frame", "frame_too_large", "empty_message", "unstorable_text"}, (
                frame[:60],
                event,
            )
            SERVER_EVENTS["error"].model_validate(event)
        await comm.send_to(bytes_data=b"\x00\x01")
        assert (await comm.receive_json_from(timeout=5))["code"] == "binary_not_supported"
        await comm.send_json_to({"type": "ping"})
        assert await comm.receive_json_from(timeout=5) == {"type": "pong"}
    finally:
        await comm.disconnect()
    assert no_pipeline == []
    assert await sync_to_async(Message.objects.count)() == 0


async def test_frames_and_relayed_events_take_no_thread_hop_to_close_connections(
    seeded_tx: None, no_pipeline: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # channels' dispatch would hop to its sync thread before every frame and every relayed
    # event (Coach's words included); this consumer's database calls close their own.
    hops: list[str] = []

    async def counted() -> None:
        hops.append("close_old_connections")

    monkeypatch.setattr("channels.consumer.aclose_old_connections", counted)
    user, session = await owned_session()
    comm = communicator(user, session.pk)
    await comm.connect()
    try:
        await comm.send_json_to({"type": "ping"})
        assert await comm.receive_json_from(timeout=5) == {"type": "pong"}
        await comm.send_json_to({"type": "user.message", "client_id": "c1", "text": "Hello"})
        assert (await comm.receive_json_from(timeout=5))["type"] == "message.accepted"  # relayed by the group
    finally:
        await comm.disconnect()
    assert hops == []
    assert await sync_to_async(Message.objects.filter(session=session).count)() == 1


async def test_a_message_sent_twice_is_stored_once(seeded_tx: None, no_pipeline: list[int]) -> None:
    user, session = await owned_session()
    comm = communicator(user, session.pk)
    await comm.connect()
    try:
        frame = {"type": "user.message", "client_id": "same-id", "text": "Hello"}
        await comm.send_json_to(frame)
        first = await comm.receive_json_from(timeout=5)
        await comm.send_json_to(frame)
        second = await comm.receive_json_from(timeout=5)
    finally:
        await comm.disconnect()
    assert first["type"] == second["type"] == "message.accepted"
    assert first == second
    SERVER_EVENTS["message.accepted"].model_validate(first)
    assert await sync_to_async(Message.objects.filter(session=session).count)() == 1
    assert await sync_to_async(Turn.objects.count)() == 1
    assert len(await canvases_queued(no_pipeline, 1)) == 1


async def test_resume_replays_missed_events_in_order(seeded_tx: None, no_pipeline: list[int]) -> None:
    user, session = await owned_session()
    for n in range(3):
        await sync_to_async(accept.turn_accept)(
            session_id=session.pk, user_id=user.pk, client_id=f"c{n}", text=f"message {n}"
        )
    comm = communicator(user, session.pk)
    await comm.connect()
    try:
        await comm.send_json_to({"type": "resume", "after_seq": 1})
        replayed = [await comm.receive_json_from(timeout=5) for _ in range(2)]
        assert await comm.receive_nothing(timeout=0.3)
    finally:
        await comm.disconnect()
    assert [e["seq"] for e in replayed] == [2, 3]
    assert [e["text"] for e in replayed] == ["message 1", "message 2"]


async def test_resume_reports_where_the_running_turns_agents_stand(seeded_tx: None, no_pipeline: list[int]) -> None:
    """Agent progress is not persisted; a resuming client gets it from the AgentRun rows."""
    user, session = await owned_session()
    accepted = await sync_to_async(accept.turn_accept)(
        session_id=session.pk, user_id=user.pk, client_id="c1", text="message"
    )
    turn = await sync_to_async(Turn.objects.get)(pk=accepted.turn_id)
    await sync_to_async(AgentRun.objects.create)(turn=turn, agent="shadow", status=RunStatus.SUCCEEDED, latency_ms=812)
    await sync_to_async(AgentRun.objects.create)(turn=turn, agent="persona")
    comm = communicator(user, session.pk)
    await comm.connect()
    try:
        await comm.send_json_to({"type": "resume", "after_seq": 1})
        statuses = [await comm.receive_json_from(timeout=5) for _ in range(2)]
        assert await comm.receive_nothing(timeout=0.3)
    finally:
        await comm.disconnect()
    assert [(e["agent"], e["state"], e["ms"]) for e in statuses] == [
        ("shadow", "succeeded", 812),
        ("persona", "started", None),
    ]
    for event in statuses:
        SERVER_EVENTS["agent.status"].model_validate(event)


async def test_oversized_text_is_refused_without_storing(
    seeded_tx: None, no_pipeline: list[int], settings: Any
) -> None:
    settings.COACHING_MAX_MESSAGE_CHARS = 10
    user, session = await owned_session()
    comm = communicator(user, session.pk)
    await comm.connect()
    try:
        await comm.send_json_to({"type": "user.message", "client_id": "long", "text": "x" * 11})
        event = await comm.receive_json_from(timeout=5)
    finally:
        await comm.disconnect()
    assert event["code"] == "message_too_long"
    assert await sync_to_async(Message.objects.count)() == 0


async def test_logout_closes_the_users_open_sockets(seeded_tx: None, no_pipeline: list[int]) -> None:
    user, session = await owned_session()
    comm = communicator(user, session.pk)
    connected, _ = await comm.connect()
    assert connected
    await sync_to_async(event_log.user_sockets_close)(user_id=user.pk)
    closed = await comm.receive_output(timeout=5)
    assert closed["type"] == "websocket.close"
    assert closed["code"] == event_log.CLOSE_LOGGED_OUT


async def test_the_server_can_ask_a_sessions_sockets_to_reconnect(seeded_tx: None, no_pipeline: list[int]) -> None:
    user, session = await owned_session()
    comm = communicator(user, session.pk)
    await comm.connect()
    await sync_to_async(event_log.session_sockets_close)(session_id=session.pk)
    closed = await comm.receive_output(timeout=5)
    assert closed["type"] == "websocket.close"
    assert closed["code"] == event_log.CLOSE_RECONNECT


async def test_crisis_language_gets_resources_and_a_calm_reply_with_no_model(
    seeded_tx: None, no_pipeline: list[int]
) -> None:
    # no_pipeline points every agent at a port where nothing listens: no model can answer.
    # The pre-gate loaded first, as Daphne does at startup (pregate.warm_at_startup): run alone,
    # this test's message otherwise paid for loading the classifier and fitting whose.py (> 1 s).
    await sync_to_async(pregate.warm)(evaluation.seeded_patterns())
    user, session = await owned_session()
    comm = communicator(user, session.pk)
    await comm.connect()
    try:
        await comm.send_json_to({"type": "user.message", "client_id": "sos", "text": "I want to end my life"})
        events = [await comm.receive_json_from(timeout=1) for _ in range(3)]
    finally:
        await comm.disconnect()
    assert [e["type"] for e in events] == ["message.accepted", "safety.notice", "coach.done"]
    for event in events:
        SERVER_EVENTS[event["type"]].model_validate(event)
    assert events[1]["level"] == "crisis"
    assert events[1]["resources"]
    assert "emergency" in events[2]["text"]
    turn = await sync_to_async(Turn.objects.get)(session=session)
    assert turn.flagged is True
    assert turn.escalation == "crisis"
    assert turn.coach_message_id == events[2]["message_id"]


async def test_messages_beyond_the_per_minute_limit_are_refused(
    seeded_tx: None, no_pipeline: list[int], settings: Any
) -> None:
    settings.COACHING_TURNS_PER_MINUTE = 3
    user, session = await owned_session()
    comm = communicator(user, session.pk)
    await comm.connect()
    try:
        codes = []
        for n in range(5):
            await comm.send_json_to({"type": "user.message", "client_id": f"r{n}", "text": f"message {n}"})
            event = await comm.receive_json_from(timeout=5)
            codes.append(event.get("code", event["type"]))
            # One turn at a time: end this one, as the pipeline would, before the next message.
            await sync_to_async(Turn.objects.filter(session=session).update)(status="done")
    finally:
        await comm.disconnect()
    # A minute boundary may fall inside the loop; then one more message gets through.
    assert codes[:3] == ["message.accepted"] * 3 or codes.count("message.accepted") == 4
    assert "rate_limited" in codes
    assert await sync_to_async(Message.objects.count)() == codes.count("message.accepted")


async def test_sockets_beyond_the_per_user_limit_are_refused(seeded_tx: None, settings: Any) -> None:
    settings.COACHING_MAX_SOCKETS_PER_USER = 2
    user, session = await owned_session()
    first, second, third = (communicator(user, session.pk) for _ in range(3))
    assert (await first.connect())[0]
    assert (await second.connect())[0]
    await third.connect()
    assert await third.receive_output(timeout=5) == {"type": "websocket.close", "code": 4429}
    await first.disconnect()
    fourth = communicator(user, session.pk)
    await fourth.connect()
    assert await fourth.receive_nothing(timeout=0.3)  # a slot was freed: accepted and open
    await fourth.disconnect()
    await second.disconnect()


async def test_a_database_call_waiting_on_a_lock_holds_up_no_other_coachee(
    seeded_tx: None, no_pipeline: list[int]
) -> None:
    """Alice's accept waits on her session's row (held elsewhere); Bob's is stored meanwhile.
    On one database thread for the whole process (channels' default) Bob waited for Alice."""
    alice, alice_session = await owned_session("alice")
    bob, bob_session = await owned_session("bob")
    alice_socket, bob_socket = communicator(alice, alice_session.pk), communicator(bob, bob_session.pk)
    await alice_socket.connect()
    await bob_socket.connect()
    holder = await psycopg.AsyncConnection.connect(stack_env()["DATABASE_URL"])
    try:
        await holder.execute(
            f"SELECT id FROM {CoachingSession._meta.db_table} WHERE id = %s FOR UPDATE",
            [alice_session.pk],
        )
        await alice_socket.send_json_to({"type": "user.message", "client_id": "a-1", "text": "Hello"})
        await until_waiting_on_a_lock(holder)
        await bob_socket.send_json_to({"type": "user.message", "client_id": "b-1", "text": "Hi"})
        assert (await bob_socket.receive_json_from(timeout=10))["type"] == "message.accepted"
        assert await alice_socket.receive_nothing(timeout=0.2)  # still waiting
        await holder.commit()
        assert (await alice_socket.receive_json_from(timeout=10))["type"] == "message.accepted"
    finally:
        await holder.close()
        await alice_socket.disconnect()
        await bob_socket.disconnect()
    assert len(await canvases_queued(no_pipeline, 2)) == 2


async def until_waiting_on_a_lock(conn: psycopg.AsyncConnection[Any], timeout_s: float = 10) -> None:
    for _ in range(int(timeout_s / 0.05)):
        cursor = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        row = await cursor.fetchone()
        if row is not None and row[0] > 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("no statement started waiting on the lock")
