"""The Shadow → trio handoff, on the real Redis: given, lost, or never coming."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator

import pytest
from django.db import connections

from agents import handoff, pipeline, services, tasks
from agents.llm.simulator import SimulatorServer
from agents.models import AgentRun, Message, RunStatus, Turn

pytestmark = pytest.mark.timeout(30)
TRIO = ["persona", "plasticity", "stability"]


@pytest.fixture
def turn_id() -> Iterator[int]:
    """An id no real turn of this run has, with nothing left in Redis by an earlier run."""
    turn_id = random.randrange(10**9, 2 * 10**9)
    handoff.forget(turn_id)
    yield turn_id
    handoff.forget(turn_id)


class DoneProbe:
    """A `done` callback that counts how often the wait had to ask the database."""

    def __init__(self, answer: bool) -> None:
        self.answer, self.calls = answer, 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.answer


def test_a_given_handoff_wakes_each_waiting_specialist(turn_id: int) -> None:
    probes = {agent: DoneProbe(False) for agent in TRIO}
    woke: dict[str, bool] = {}

    def wait(agent: str) -> None:
        woke[agent] = handoff.wait(turn_id, handoff.SHADOW, agent, deadline=time.time() + 30, done=probes[agent])

    threads = [threading.Thread(target=wait, args=(agent,)) for agent in TRIO]
    for thread in threads:
        thread.start()
    handoff.give(turn_id, handoff.SHADOW, TRIO)
    for thread in threads:
        thread.join(10)
    assert woke == dict.fromkeys(TRIO, True)


def test_a_handoff_given_before_the_wait_is_taken_without_asking_the_database(turn_id: int) -> None:
    handoff.give(turn_id, handoff.SHADOW, ["persona"])
    probe = DoneProbe(False)
    assert handoff.wait(turn_id, handoff.SHADOW, "persona", deadline=time.time() + 30, done=probe) is True
    assert probe.calls == 0  # the token, not a slice


def test_synth_waits_for_all_three_tokens(turn_id: int) -> None:
    handoff.give(turn_id, handoff.TRIO, ["synth"])
    handoff.give(turn_id, handoff.TRIO, ["synth"])
    probe = DoneProbe(False)
    # Two of three: the wait runs to its deadline, asking the database between slices.
    assert handoff.wait(turn_id, handoff.TRIO, "synth", deadline=time.time() + 1.5, done=probe, tokens=3) is False
    assert probe.calls >= 1
    handoff.give(turn_id, handoff.TRIO, ["synth"] * 3)
    assert handoff.wait(turn_id, handoff.TRIO, "synth", deadline=time.time() + 30, done=DoneProbe(False), tokens=3)


def test_a_lost_token_is_made_good_by_the_database(turn_id: int) -> None:
    probe = DoneProbe(True)
    assert handoff.wait(turn_id, handoff.SHADOW, "persona", deadline=time.time() + 30, done=probe) is True
    assert probe.calls == 1


def test_a_handoff_that_never_comes_ends_at_the_deadline(turn_id: int) -> None:
    assert handoff.wait(turn_id, handoff.SHADOW, "persona", deadline=time.time() + 1.5, done=DoneProbe(False)) is False


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


def test_a_trio_that_cannot_be_queued_ends_the_turn_with_the_fallback_at_once(
    turn: Turn, sim: SimulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    class BrokerDown:
        def apply_async(self) -> None:
            raise ConnectionError("broker down")

    monkeypatch.setattr(tasks, "trio_canvas", lambda turn_id: BrokerDown())
    assert tasks.shadow_task(turn.pk)["status"] == RunStatus.SUCCEEDED
    turn.refresh_from_db()
    assert turn.status == "done"
    assert turn.degraded is True
    assert turn.flag_reason == "the turn's agents could not be queued"
    assert [m.text for m in Message.objects.filter(session=turn.session, role="synth")] == [services.FALLBACK_REPLY]
