"""A second message while the session's turn still runs is refused with an error the page
acts on (it queues the message); it never starts a turn that competes with the first."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agents.models import Message, Turn, TurnStatus
from agents.roles.schemas import SERVER_EVENTS
from agents.turns import accept, finish, sessions
from tests.support.people import make_coachee
from tests.support.sockets import canvases_queued, communicator, owned_session

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_thread_connections")]


async def send(comm: Any, client_id: str, text: str) -> dict[str, Any]:
    await comm.send_json_to({"type": "user.message", "client_id": client_id, "text": text})
    # The first accept of a process loads the crisis classifier: slow on a busy machine.
    event: dict[str, Any] = await comm.receive_json_from(timeout=20)
    return event


async def test_a_second_message_during_a_running_turn_is_refused_and_starts_nothing(
    seeded_tx: None,
    no_pipeline: list[int],
) -> None:
    user, session = await owned_session()
    comm = communicator(user, session.pk)
    await comm.connect()
    try:
        first = await send(comm, "first", "I keep skipping my runs.")
        refused = await send(comm, "second", "And one more thing.")
        # A re-send of the first message is still acknowledged, not refused as busy.
        again = await send(comm, "first", "I keep skipping my runs.")
    finally:
        await comm.disconnect()
    assert first["type"] == "message.accepted"
    SERVER_EVENTS["error"].model_validate(refused)
    assert refused["code"] == "turn_running"
    assert refused["turn_id"] == first["turn_id"]
    assert refused["client_id"] == "second"
    assert "still coming" in refused["detail"]
    assert again == first
    texts = await sync_to_async(lambda: list(Message.objects.filter(session=session).values_list("text", flat=True)))()
    assert texts == ["I keep skipping my runs."]
    assert await sync_to_async(Turn.objects.count)() == 1
    assert await canvases_queued(no_pipeline, 1) == [first["turn_id"]]


async def test_the_queued_message_is_taken_once_the_turn_ends(
    seeded_tx: None,
    no_pipeline: list[int],
) -> None:
    user, session = await owned_session()
    comm = communicator(user, session.pk)
    await comm.connect()
    try:
        first = await send(comm, "first", "Hello")
        assert (await send(comm, "second", "Queued words"))["code"] == "turn_running"
        await sync_to_async(finish.turn_stop)(turn_id=first["turn_id"], user_id=user.pk)
        done = await comm.receive_json_from(timeout=5)
        assert done["type"] == "turn.done"
        second = await send(comm, "second", "Queued words")
    finally:
        await comm.disconnect()
    assert second["type"] == "message.accepted"
    assert second["turn_id"] != first["turn_id"]
    statuses = await sync_to_async(lambda: list(Turn.objects.order_by("pk").values_list("status", flat=True)))()
    assert statuses == [TurnStatus.STOPPED, TurnStatus.RUNNING]


def test_the_service_itself_refuses_a_second_turn(seeded: None) -> None:
    """The check is in turn_accept, under the session's row lock, not only in the socket."""
    user = make_coachee("racer")
    session = sessions.session_start(user_id=user.pk)
    accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id="a", text="one", one_turn_at_a_time=True)
    with pytest.raises(accept.TurnRunningError):
        accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id="b", text="two", one_turn_at_a_time=True)
    assert Turn.objects.filter(session=session).count() == 1


def test_a_turn_the_crisis_pre_gate_answered_holds_no_message_back(seeded: None) -> None:
    """Someone in danger who writes again is heard now, not after the first turn's full answer."""
    user = make_coachee("in-danger")
    session = sessions.session_start(user_id=user.pk)
    crisis = accept.turn_accept(
        session_id=session.pk, user_id=user.pk, client_id="a", text="I want to end my life", one_turn_at_a_time=True
    )
    assert Turn.objects.get(pk=crisis.turn_id).escalation == "crisis"
    again = accept.turn_accept(
        session_id=session.pk, user_id=user.pk, client_id="b", text="I am scared", one_turn_at_a_time=True
    )
    assert again.created
    # The new turn is an ordinary one: the next message waits for it.
    with pytest.raises(accept.TurnRunningError):
        accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id="c", text="ok", one_turn_at_a_time=True)
