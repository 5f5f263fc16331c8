"""The Shadow → trio handoff, on the real Redis: given, lost, or never coming."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator

import pytest
from django.db import connections

from agents import handoff, pipeline
from agents.llm.simulator import SimulatorServer
from agents.models import AgentRun, RunStatus, Turn

pytestmark = pytest.mark.timeout(30)
TRIO = ["persona", "plasticity", "stability"]


@pytest.fixture
def turn_id() -> Iterator[int]:
    """An id no real turn of this run has, with nothing left in Redis by an earlier run."""
    turn_id = random.randrange(10**9, 2 * 10**9)
    handoff.forget(turn_id)
    yield turn_id
    handoff.forget(turn_id)


def test_a_given_handoff_wakes_each_waiting_specialist_at_once(turn_id: int) -> None:
    woke: dict[str, float] = {}

    def wait(agent: str) -> None:
        handoff.wait(turn_id, handoff.SHADOW, agent, deadline=time.time() + 10, done=lambda: False)
        woke[agent] = time.monotonic()

    threads = [threading.Thread(target=wait, args=(agent,)) for agent in TRIO]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    given = time.monotonic()
    handoff.give(turn_id, handoff.SHADOW, TRIO)
    for thread in threads:
        thread.join(5)
    assert sorted(woke) == TRIO
    assert max(woke.values()) - given < 0.5  # by the token, not by a slice of SLICE_S


def test_a_handoff_given_before_the_wait_is_not_missed(turn_id: int) -> None:
    handoff.give(turn_id, handoff.SHADOW, ["persona"])
    started = time.monotonic()
    assert handoff.wait(turn_id, handoff.SHADOW, "persona", deadline=time.time() + 10, done=lambda: False) is True
    assert time.monotonic() - started < 0.5


def test_a_lost_token_costs_one_slice_then_the_database_answers(turn_id: int) -> None:
    started = time.monotonic()
    assert handoff.wait(turn_id, handoff.SHADOW, "persona", deadline=time.time() + 10, done=lambda: True) is True
    assert handoff.SLICE_S * 0.9 <= time.monotonic() - started < handoff.SLICE_S * 3


def test_a_handoff_that_never_comes_ends_at_the_deadline(turn_id: int) -> None:
    started = time.monotonic()
    assert handoff.wait(turn_id, handoff.SHADOW, "persona", deadline=time.time() + 1.5, done=lambda: False) is False
    assert 1.4 <= time.monotonic() - started < 3


def test_the_trio_is_queued_once_per_turn(turn_id: int) -> None:
    published: list[int] = []
    assert handoff.queue_once(turn_id, lambda: published.append(1)) is True
    assert handoff.queue_once(turn_id, lambda: published.append(2)) is False
    assert published == [1]


def test_a_failed_queueing_can_be_tried_again(turn_id: int) -> None:
    def broker_down() -> None:
        raise ConnectionError("broker down")

    with pytest.raises(ConnectionError):
        handoff.queue_once(turn_id, broker_down)
    assert handoff.queue_once(turn_id, lambda: None) is True


def test_a_specialist_queued_with_shadow_calls_its_model_only_after_shadow(
    seeded_tx: None, turn: Turn, sim: SimulatorServer
) -> None:
    # seeded_tx: the specialist's thread has its own connection, so the turn must be committed.
    result: dict[str, str] = {}

    def run_specialist() -> None:
        try:
            result["status"] = pipeline.specialist_step(turn_id=turn.pk, agent="stability", after_shadow=True)
        finally:
            connections.close_all()  # this thread's connection, back to the pool

    specialist = threading.Thread(target=run_specialist)
    specialist.start()
    time.sleep(0.5)
    assert [c["agent"] for c in sim.calls()] == []  # waiting for Shadow
    assert pipeline.shadow_step(turn_id=turn.pk) == RunStatus.SUCCEEDED
    specialist.join(10)
    assert result["status"] == RunStatus.SUCCEEDED
    assert [c["agent"] for c in sim.calls()] == ["shadow", "stability"]
    stability = AgentRun.objects.get(turn=turn, agent="stability")
    assert "Shadow's findings for this message:\n<<<data" in stability.extra_instructions
