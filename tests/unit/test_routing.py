"""Role → endpoint routing: fallbacks, the cross-process concurrency limit (Redis lease
semaphore), priorities and per-coachee cache salts. Unit tests first, then the real stack:
Daphne, two Celery worker processes and two simulated model servers."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.llm import breaker, embedded, limits
from agents.llm.routing import cache_salt_for
from agents.llm.schema import extra_body_for
from agents.llm.simulator.server import SimulatorServer
from agents.models import (
    Agent,
    AgentConfig,
    AgentFallback,
    AgentRun,
    Message,
    MessageStatus,
    RunStatus,
    Turn,
)
from agents.pipeline import runner, steps
from agents.turns import accept, dispatch
from agents.turns.sessions import session_start
from tests.support.config import endpoint_on
from tests.support.people import make_coachee
from tests.support.stack import ROOT as REPO_ROOT
from tests.support.stack import free_port, stack_env


def test_a_limit_of_two_admits_two_then_waits_until_the_deadline(slots: None) -> None:
    first = limits.acquire("ep", 2, deadline=time.time() + 5)
    second = limits.acquire("ep", 2, deadline=time.time() + 5)
    assert limits.in_use("ep") == 2
    started = time.monotonic()
    with pytest.raises(limits.LLMSlotTimeout) as refused:
        limits.acquire("ep", 2, deadline=time.time() + 0.3)
    assert 0.2 <= time.monotonic() - started < 1.5
    assert refused.value.code == "llm_busy"
    first.release()
    third = limits.acquire("ep", 2, deadline=time.time() + 1)
    assert third.slot is not None
    assert limits.in_use("ep") == 2
    second.release()
    third.release()
    assert limits.in_use("ep") == 0


def test_a_waiting_call_gets_the_slot_released_meanwhile_and_reports_its_wait(slots: None) -> None:
    held = limits.acquire("ep", 1, deadline=time.time() + 5)

    async def release_later() -> None:
        await asyncio.sleep(0.3)
        await held.arelease()

    async def wait_for_slot() -> limits.Lease:
        return await limits.aacquire("ep", 1, deadline=time.time() + 5)

    async def both() -> limits.Lease:
        waiter = asyncio.ensure_future(wait_for_slot())
        await release_later()
        return await waiter

    lease = asyncio.run(both())
    assert 0.25 <= lease.waited_s < 2.0
    lease.release()


def test_release_removes_only_its_own_slot_and_twice_is_harmless(slots: None) -> None:
    a = limits.acquire("ep", 2, deadline=time.time() + 5)
    b = limits.acquire("ep", 2, deadline=time.time() + 5)
    a.release()
    a.release()  # a second release must not free b's slot
    assert limits.in_use("ep") == 1
    b.release()
    assert limits.in_use("ep") == 0


def test_a_crashed_holders_slot_heals_when_its_lease_expires(slots: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "LEASE_MARGIN_S", 0.3)
    limits.acquire("ep", 1, deadline=time.time() + 5, timeout_s=0.0)  # never released: its process "died"
    assert limits.in_use("ep") == 1
    lease = limits.acquire("ep", 1, deadline=time.time() + 3)
    assert 0.1 < lease.waited_s < 2.0
    lease.release()


async def coach_waits(endpoint: str) -> None:
    """Until a Coach call is registered as waiting for a slot of `endpoint` (5 s at most)."""
    for _ in range(500):
        if await asyncio.to_thread(limits.waiting_first, endpoint):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no Coach call is waiting")


def test_coach_takes_the_next_free_slot_ahead_of_background_calls_that_waited_longer(slots: None) -> None:
    """Three background calls wait for the only slot; Coach comes later and still gets it
    first. Without the priority Coach would win the race against their polls about one time
    in four."""
    held = limits.acquire("ep", 1, deadline=time.time() + 5)
    order: list[str] = []
    lock = threading.Lock()

    def background(i: int) -> None:
        lease = limits.acquire("ep", 1, deadline=time.time() + 10)
        with lock:
            order.append(f"background-{i}")
        time.sleep(0.05)
        lease.release()

    waiters = [threading.Thread(target=background, args=(i,)) for i in range(3)]
    for thread in waiters:
        thread.start()
    time.sleep(0.2)  # the three are polling

    async def coach_call() -> None:
        lease = await limits.aacquire("ep", 1, deadline=time.time() + 10, priority=True)
        with lock:
            order.append("coach")
        await asyncio.sleep(0.05)
        await lease.arelease()

    async def scenario() -> None:
        task = asyncio.ensure_future(coach_call())
        await coach_waits("ep")
        await held.arelease()
        await task

    asyncio.run(scenario())
    for thread in waiters:
        thread.join(timeout=10)
    assert order[0] == "coach"
    assert sorted(order[1:]) == ["background-0", "background-1", "background-2"]
    assert limits.waiting_first("ep") == 0


def test_a_coach_call_that_gives_up_waiting_holds_no_background_call_back(slots: None) -> None:
    held = limits.acquire("ep", 1, deadline=time.time() + 5)
    with pytest.raises(limits.LLMSlotTimeout):
        asyncio.run(limits.aacquire("ep", 1, deadline=time.time() + 0.2, priority=True))
    assert limits.waiting_first("ep") == 0
    held.release()
    # Taken at once: the withdrawn Coach call does not keep the free slot for itself.
    lease = limits.acquire("ep", 1, deadline=time.time() + 0.1)
    assert lease.slot is not None
    lease.release()


def test_while_coach_waits_a_background_call_takes_only_a_slot_beyond_it(slots: None) -> None:
    """Limit 2, one held, one Coach call waiting on a full endpoint: after one release one slot
    is free and it is Coach's; a background call gets none until a second is free."""
    a = limits.acquire("ep", 2, deadline=time.time() + 5)
    b = limits.acquire("ep", 2, deadline=time.time() + 5)

    async def scenario() -> None:
        coach_call = asyncio.ensure_future(limits.aacquire("ep", 2, deadline=time.time() + 5, priority=True))
        await coach_waits("ep")
        a.release()
        with pytest.raises(limits.LLMSlotTimeout):
            await asyncio.to_thread(limits.acquire, "ep", 2, deadline=time.time() + 0.02)
        lease = await coach_call
        assert lease.slot is not None
        b.release()
        background = await asyncio.to_thread(limits.acquire, "ep", 2, deadline=time.time() + 1)
        assert background.slot is not None
        background.release()
        await lease.arelease()

    asyncio.run(scenario())


HOLDER = """
import sys, time, django
django.setup()
from agents.llm import limits
lease = limits.acquire("ep", int(sys.argv[1]), deadline=time.time() + 10)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
lease.release()
"""


def test_the_limit_holds_across_processes(slots: None) -> None:
    """Three processes want one of two slots: only two hold one at a time."""
    env = stack_env()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", HOLDER, "2", "1.0"], env=env, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    peak = 0
    deadline = time.monotonic() + 20
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        peak = max(peak, limits.in_use("ep"))
        time.sleep(0.02)
    for p in procs:
        assert p.wait(timeout=10) == 0
    assert peak == 2


def test_cache_salt_is_per_coachee_stable_and_fits_vllms_rules() -> None:
    salt = cache_salt_for(7)
    assert salt == cache_salt_for(7) != cache_salt_for(8)
    # vLLM 0.32/0.33 (validate_cache_salt): non-empty, at most 128 characters, no '@', '/', '\\', NUL.
    assert 0 < len(salt) <= 128
    assert not set(salt) & {"@", "/", "\\", "\0"}
    body = extra_body_for("vllm", thinking=False, priority_of="coach", cache_salt=salt)
    assert body["cache_salt"] == salt
    assert body["priority"] == 0
    assert extra_body_for("llamacpp", thinking=False, cache_salt=salt) == {}
    assert extra_body_for("vllm", thinking=False, priority_of="shadow")["priority"] > body["priority"]


@pytest.fixture
def two_endpoints(
    seeded: None, sim: SimulatorServer, sim_b: SimulatorServer, slots: None, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Turn]:
    """A running turn whose agents use "primary" (sim), Shadow with "backup" (sim_b) as its
    fallback. Set up before the turn: a turn keeps the setup it started with."""
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    sim_b.reset()
    primary = endpoint_on(sim, "primary")
    backup = endpoint_on(sim_b, "backup")
    AgentConfig.objects.update(endpoint=primary)
    AgentFallback.objects.create(config=AgentConfig.objects.get(agent=Agent.SHADOW), endpoint=backup, position=1)
    for server in (sim, sim_b):
        server.configure(default={"ttft_ms": 0, "tokens_per_s": 0})
    yield new_turn("coachee")
    sim_b.reset()


def new_turn(username: str) -> Turn:
    user = make_coachee(username)
    session = session_start(user_id=user.pk)
    accepted = accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id="c-1", text="I skip my runs.")
    return runner.load_turn(accepted.turn_id)


def test_shadow_falls_back_when_its_primary_fails_and_records_it(
    two_endpoints: Turn, sim: SimulatorServer, sim_b: SimulatorServer, settings: Any
) -> None:
    settings.COACHING_LLM_MAX_RETRIES = 0
    sim.configure(agents={"shadow": {"fault": "http_500"}})
    steps.shadow_step(turn_id=two_endpoints.pk)
    run = AgentRun.objects.get(turn=two_endpoints, agent=Agent.SHADOW)
    assert run.status == RunStatus.SUCCEEDED, run.error
    assert run.endpoint is not None
    assert run.endpoint.name == "backup"
    assert run.fallback_from is not None
    assert run.fallback_from.name == "primary"
    assert run.slot_wait_ms is not None
    assert len(sim.calls("shadow")) == 1
    assert len(sim_b.calls("shadow")) == 1
    # The coachee's salt went to both servers (both are vLLM).
    salt = cache_salt_for(two_endpoints.session.coachee_id)
    assert [c["cache_salt"] for c in sim.calls("shadow") + sim_b.calls("shadow")] == [salt, salt]


def test_an_open_breaker_sends_the_call_straight_to_the_fallback(
    two_endpoints: Turn, sim: SimulatorServer, sim_b: SimulatorServer, settings: Any
) -> None:
    circuit = breaker.for_endpoint("primary")
    for _ in range(settings.COACHING_LLM_BREAKER_THRESHOLD):
        circuit.record_failure()
    steps.shadow_step(turn_id=two_endpoints.pk)
    run = AgentRun.objects.get(turn=two_endpoints, agent=Agent.SHADOW)
    assert run.status == RunStatus.SUCCEEDED
    assert run.endpoint is not None
    assert run.endpoint.name == "backup"
    assert sim.calls("shadow") == []  # never asked: its breaker refused at once


def test_an_agent_without_fallbacks_fails_as_before(two_endpoints: Turn, sim: SimulatorServer, settings: Any) -> None:
    settings.COACHING_LLM_MAX_RETRIES = 0
    AgentFallback.objects.all().delete()
    turn = new_turn("coachee-2")  # a turn keeps the setup it started with
    sim.configure(agents={"shadow": {"fault": "http_500"}})
    steps.shadow_step(turn_id=turn.pk)
    run = AgentRun.objects.get(turn=turn, agent=Agent.SHADOW)
    assert run.status == RunStatus.FAILED
    assert run.fallback_from is None
    assert run.endpoint is not None
    assert run.endpoint.name == "primary"


def test_synth_is_told_that_coachs_reply_was_cut_off(two_endpoints: Turn) -> None:
    """Synth reads a failed Coach reply as the words the coachee saw, marked as cut off."""
    message = Message.objects.create(
        session=two_endpoints.session, seq=99, role="coach", text="You could start with", status=MessageStatus.FAILED
    )
    Turn.objects.filter(pk=two_endpoints.pk).update(coach_message=message)
    cut_off = "You could start with (cut off here: the model failed mid-reply)"
    assert steps.coach_reply_text(two_endpoints.pk) == cut_off
    Message.objects.filter(pk=message.pk).update(status=MessageStatus.COMPLETE)
    assert steps.coach_reply_text(two_endpoints.pk) == "You could start with"


def test_the_embedded_vllm_endpoint_is_limited_to_what_the_server_batches() -> None:
    """scripts/run.sh sets the embedded vLLM endpoint's slot limit to the server's --max-num-seqs:
    lower, the limit would queue requests that vLLM's CPU build decodes together (a turn several
    times slower); the seeded row's limit of 1 is for a llama.cpp server (one at a time)."""
    script = (REPO_ROOT / "scripts" / "run.sh").read_text()
    configure = re.search(r"endpoint_configure embedded (.*?)--agents", script, re.DOTALL)
    assert configure is not None
    limit = re.search(r"--max-concurrency (\d+)", configure.group(1))
    assert limit is not None
    assert "--kind vllm" in configure.group(1)
    assert "--priority-scheduling" in configure.group(1)
    assert int(limit.group(1)) == embedded.MAX_NUM_SEQS
    assert (
        str(embedded.MAX_NUM_SEQS)
        in embedded.server_command(engine_python="python", model_dir="m", port=1, cache_dir="c").argv
    )


def test_waiting_for_the_embedded_server_ends_at_once_when_it_has_exited(tmp_path: Path) -> None:
    """A model server that dies while it starts fails the wait at once, naming its log, rather
    than after the start's timeout (minutes)."""
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="exited before it was ready"):
        embedded.wait_ready(
            f"http://127.0.0.1:{free_port()}", tmp_path / "vllm.log", timeout_s=600, alive=lambda: False
        )
    assert time.monotonic() - started < 60
