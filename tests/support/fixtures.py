"""Fixtures shared across test folders (registered as a plugin by tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agents.llm import limits
from agents.llm.simulator.server import SimulatorServer
from agents.turns import dispatch
from tests.support.config import point_agents_at
from tests.support.faults import ProcessStack


@pytest.fixture
def on_sim(seeded: None, sim: SimulatorServer, monkeypatch: pytest.MonkeyPatch) -> SimulatorServer:
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    point_agents_at(sim.base_url)
    sim.configure(default={"ttft_ms": 0, "tokens_per_s": 0})
    return sim


@pytest.fixture
def no_pipeline(monkeypatch: pytest.MonkeyPatch, seeded_tx: None) -> list[int]:
    """Record turns instead of queueing Celery work; Coach is not started either."""
    # A concurrent endpoint, so the canvas is due at once (not after Coach, see turns.accept).
    point_agents_at("http://127.0.0.1:9/v1")
    started: list[int] = []
    monkeypatch.setattr(dispatch, "turn_pipeline_start", started.append)

    async def no_coach(turn_id: int, call: Any) -> None:
        if call is not None:
            call.state.answered.set()  # as a request answered at once: the canvas need not wait

    monkeypatch.setattr("agents.chat.consumers.coach_run", no_coach)
    return started


@pytest.fixture
def make_stack() -> Iterator[Any]:
    stacks: list[ProcessStack] = []

    def make(name: str, *, deadline_s: float, **extra_env: str) -> ProcessStack:
        stack = ProcessStack(name, deadline_s, extra_env)
        stacks.append(stack)
        stack.start_redis()
        stack.start_worker()
        stack.start_web()
        return stack

    yield make
    for stack in stacks:
        stack.stop_all()


@pytest.fixture(scope="module")
def sim_b() -> Iterator[SimulatorServer]:
    """A second simulated model server: the other endpoint."""
    with SimulatorServer(port=0, ttft_ms=20, tokens_per_s=400, output_tokens=30) as server:
        yield server


@pytest.fixture
def slots() -> Iterator[None]:
    limits.reset_all()
    yield
    limits.reset_all()
