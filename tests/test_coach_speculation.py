"""Coach's request sent before its turn is stored (coach.Speculation): kept only when it fits
the stored turn, else stopped before any of its tokens reaches the coachee."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async

from agents import context_ahead, services, stamps, turn_cache
from agents.coach import Accepted, Speculation, coach_accept, coach_prepare, coach_run, coach_speculate
from agents.llm import breaker
from agents.llm.simulator import SimulatorServer, messages_sha
from agents.models import Message, MessageStatus, Role, Turn
from tests.conftest import make_coachee, point_agents_at

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("close_thread_connections")]

TEXT = "Work got in the way again."


@pytest.fixture
def read_ahead(seeded_tx: None, sim: SimulatorServer, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """A coachee whose next turn's context this process has read ahead, the setup kept."""
    monkeypatch.setattr(services, "_start_pipeline", lambda turn_id: None)
    point_agents_at(sim.base_url)
    # The first token comes well after the turn is stored: the test decides what happens first.
    sim.configure(default={"ttft_ms": 400, "tokens_per_s": 400})
    user = make_coachee()
    session = services.session_start(user_id=user.pk)
    turn_cache.setup_at(stamps.versions([stamps.SETUP])[stamps.SETUP])
    context_ahead.read_ahead(session_id=session.pk)
    return user, session


async def _until(check: Callable[[], Any], timeout_s: float = 5.0) -> Any:
    ends = time.monotonic() + timeout_s
    while not (found := check()):
        assert time.monotonic() < ends, "timed out"
        await asyncio.sleep(0.01)
    return found


def _sent(user: Any, session: Any) -> Speculation:
    """Coach's early request for TEXT, which must go out."""
    speculation = coach_speculate(session_id=session.pk, user_id=user.pk, text=TEXT)
    assert speculation is not None
    return speculation


async def _accept(user: Any, session: Any, speculation: Speculation | None, client_id: str = "c-1") -> Accepted:
    return await database_sync_to_async(coach_accept)(
        session_id=session.pk, user_id=user.pk, client_id=client_id, text=TEXT, speculation=speculation
    )


async def test_the_request_goes_out_before_the_turn_exists_and_is_kept_when_it_fits(
    read_ahead: tuple[Any, Any], sim: SimulatorServer
) -> None:
    user, session = read_ahead
    speculation = _sent(user, session)
    message_id, turn_id = speculation.ids
    await _until(lambda: sim.calls("coach"))
    assert not await database_sync_to_async(Turn.objects.filter(pk=turn_id).exists)()

    accepted = await _accept(user, session, speculation)
    assert accepted.result is not None
    assert (accepted.result.message_id, accepted.result.turn_id) == (message_id, turn_id)
    assert accepted.call is speculation.call
    # Stored with the turn: Shadow does not wait for Coach to store it.
    stored = await database_sync_to_async(Turn.objects.get)(pk=turn_id)
    assert stored.shared_prompt == speculation.call.messages[0]["content"]
    # The very request Coach would have prepared from the stored turn.
    prepared = await database_sync_to_async(coach_prepare)(turn_id=turn_id)
    assert prepared is not None
    assert prepared.messages == speculation.call.messages

    await coach_run(turn_id, accepted.call, speculation=speculation)
    calls = sim.calls("coach")
    assert len(calls) == 1
    assert calls[0]["turn"] == str(turn_id)
    assert calls[0]["messages_sha"] == messages_sha(prepared.messages)
    reply = await database_sync_to_async(Message.objects.get)(session=session, role=Role.COACH)
    assert reply.status == MessageStatus.COMPLETE
    assert reply.text
    turn = await database_sync_to_async(Turn.objects.get)(pk=turn_id)
    assert turn.shared_prompt == speculation.call.messages[0]["content"]  # the prefix the others read


async def test_a_write_after_the_read_ahead_stops_the_early_request_and_coach_asks_again(
    read_ahead: tuple[Any, Any], sim: SimulatorServer
) -> None:
    user, session = read_ahead
    speculation = _sent(user, session)
    # A coach's note lands between the read-ahead and the message: the copy is out of date.
    note = "Remember the plan from Monday."

    def write_note() -> None:
        Message.objects.create(session=session, seq=services.next_seq(session.pk), role=Role.COACH, text=note)

    await database_sync_to_async(write_note)()
    accepted = await _accept(user, session, speculation)
    assert accepted.result is not None
    assert accepted.call is not None
    assert accepted.call is not speculation.call
    stored = await database_sync_to_async(Turn.objects.get)(pk=accepted.result.turn_id)
    assert not stored.shared_prompt  # the out-of-date prefix is not stored either
    assert note in accepted.call.messages[0]["content"]

    await coach_run(accepted.result.turn_id, accepted.call, speculation=speculation)
    early, kept = sim.calls("coach")  # in the order they reached the server
    assert early["messages_sha"] == messages_sha(speculation.call.messages)
    await _until(lambda: sim.calls("coach")[0]["cancelled"])
    assert not sim.calls("coach")[0]["chunk_times"]  # stopped before its first token
    assert kept["messages_sha"] == messages_sha(accepted.call.messages)
    replies = await database_sync_to_async(list)(
        Message.objects.filter(session=session, role=Role.COACH).exclude(text=note)
    )
    assert len(replies) == 1
    assert replies[0].status == MessageStatus.COMPLETE


async def test_a_discarded_request_is_closed_at_the_server(read_ahead: tuple[Any, Any], sim: SimulatorServer) -> None:
    user, session = read_ahead
    speculation = _sent(user, session)
    await _until(lambda: sim.calls("coach"))
    speculation.discard()  # what the socket does when the message is refused or a re-send
    await _until(lambda: sim.calls("coach")[0]["cancelled"])
    assert not sim.calls("coach")[0]["chunk_times"]


async def test_the_reserved_ids_are_taken_once(read_ahead: tuple[Any, Any], sim: SimulatorServer) -> None:
    user, session = read_ahead
    first = coach_speculate(session_id=session.pk, user_id=user.pk, text=TEXT)
    second = coach_speculate(session_id=session.pk, user_id=user.pk, text="And from another tab.")
    assert first is not None
    assert second is None
    first.discard()


async def test_no_early_request_for_crisis_language_or_a_refused_coachee_or_an_open_breaker(
    read_ahead: tuple[Any, Any], sim: SimulatorServer, settings: Any
) -> None:
    user, session = read_ahead
    # Crisis language: the fixed reply replaces Coach, no model is asked (and the ids stay).
    assert coach_speculate(session_id=session.pk, user_id=user.pk, text="I want to kill myself") is None

    # A coachee refused at the rate limit: nothing goes out ahead of the next refusal.
    settings.COACHING_TURNS_PER_MINUTE = 0
    refused = await _accept(user, session, None)
    assert refused.result is None
    assert coach_speculate(session_id=session.pk, user_id=user.pk, text=TEXT) is None

    # An endpoint whose breaker Coach last found open: no request ahead of that check.
    settings.COACHING_TURNS_PER_MINUTE = 100
    other = await database_sync_to_async(make_coachee)("other")
    other_session = await database_sync_to_async(services.session_start)(user_id=other.pk)
    await database_sync_to_async(context_ahead.read_ahead)(session_id=other_session.pk)
    for _ in range(20):
        breaker.for_endpoint("test").record_failure()
    accepted = await _accept(other, other_session, None)
    assert accepted.call is not None
    assert accepted.call.circuit_open is not None
    await database_sync_to_async(context_ahead.read_ahead)(session_id=other_session.pk)
    assert coach_speculate(session_id=other_session.pk, user_id=other.pk, text=TEXT) is None
    await coach_run(accepted.result.turn_id, accepted.call)  # type: ignore[union-attr]
    assert sim.calls("coach") == []
