"""The fault matrix: every fault mode of the simulated model server, 20 concurrent turns, on
the real stack (Daphne, a Celery worker, PostgreSQL, Redis, the simulator).

For each fault every agent's calls fail that way (Coach and the critic included). Every turn
must still end, with a reply or the explicit fallback, within its deadline plus the watchdog's
grace; and no agent output stored as valid may fail its schema.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agents.llm import breaker
from agents.llm.simulator.faults import FAULTS
from agents.models import AgentRun, CoachingSession, RunStatus, Turn, TurnStatus
from agents.roles.schemas import OUTPUT_SCHEMAS, SERVER_EVENTS
from agents.turns.sessions import session_start
from tests.support.people import make_coachee
from tests.support.stack import ChatClient, LiveStack, login_cookie, stop_stack
from tests.support.turns import CLEAN_CRITIC

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(600),
    pytest.mark.usefixtures("close_thread_connections"),
]

TURNS_PER_FAULT = 20
# Short, so the slow faults (hang, timeout, slow_stream) cost seconds, not minutes.
DEADLINE_S = 12.0
# The watchdog looks 1-1.5 s after the deadline (Celery countdown and Daphne's timer); the
# rest is slack for a loaded 2-core machine delivering the fallback.
GRACE_S = 5.0
# A control row first: the same 20 turns with no fault.
ROWS: list[str | None] = [None, *sorted(FAULTS)]


@dataclass
class Outcome:
    delivered: int = 0  # Synth's reply, through the critic gate
    fallback: int = 0  # the explicit fallback reply
    degraded: int = 0  # turn.done said degraded
    notices: int = 0  # the coachee saw service.degraded
    seconds: list[float] = field(default_factory=list)


@pytest.fixture(scope="module")
def fault_stack(start_stack: Callable[..., LiveStack]) -> Iterator[LiveStack]:
    stack = start_stack(name="faults", deadline_s=DEADLINE_S)
    yield stack
    # Stopped with its module: its worker shares the tests' broker, and left running it would
    # take later tests' tasks (and record their metrics in its own directory).
    stop_stack(stack)


def coachees() -> list[tuple[Any, str]]:
    users = []
    for i in range(TURNS_PER_FAULT):
        user = make_coachee(f"fault-{i}")
        users.append((user, login_cookie(user.username, "")))
    return users


async def one_turn(stack: LiveStack, session: CoachingSession, cookie: str) -> tuple[list[dict[str, Any]], float]:
    async with ChatClient(stack, session, cookie) as client:
        sent = time.monotonic()
        await client.send({"type": "user.message", "client_id": "c-1", "text": "I keep skipping my morning runs."})
        await client.until(lambda e: e["type"] == "turn.done", timeout_s=DEADLINE_S + GRACE_S + 10)
        return client.events, time.monotonic() - sent


def stored_outputs_are_valid(session_ids: list[int]) -> tuple[int, list[str]]:
    """Re-validate every succeeded JSON run: its parsed output and its raw output."""
    bad = []
    runs = AgentRun.objects.filter(
        turn__session_id__in=session_ids, status=RunStatus.SUCCEEDED, agent__in=list(OUTPUT_SCHEMAS)
    )
    count = 0
    for run in runs:
        count += 1
        schema = OUTPUT_SCHEMAS[run.agent]
        context = {key: set(values) for key, values in (run.enums or {}).items()}
        try:
            schema.model_validate(run.parsed_output, context=context)
            schema.model_validate(json.loads(run.raw_output, strict=False), context=context)
        except Exception as exc:
            bad.append(f"{run.agent} run {run.pk}: {exc}")
    return count, bad


async def test_every_fault_mode_ends_every_turn_in_time_with_valid_outputs_only(
    fault_stack: LiveStack, live_sim: Any
) -> None:
    users = await sync_to_async(coachees)()
    table: dict[str, Outcome] = {}
    problems: list[str] = []
    for fault in ROWS:
        name = fault or "(none)"
        await sync_to_async(breaker.reset_all)()  # each fault starts from a healthy endpoint
        live_sim.reset()
        live_sim.configure(default={"fault": fault}, agents={"critic": {"script": [CLEAN_CRITIC], "repeat_last": True}})
        sessions = [await sync_to_async(session_start)(user_id=user.pk) for user, _ in users]
        try:
            results = await asyncio.gather(
                *(one_turn(fault_stack, session, cookie) for session, (_, cookie) in zip(sessions, users, strict=True))
            )
        except TimeoutError:
            print(
                f"row {name}: a turn.done did not arrive\n" + await asyncio.to_thread(fault_stack.dump_state, "faults")
            )
            raise
        outcome = table[name] = Outcome()
        for events, seconds in results:
            for event in events:
                SERVER_EVENTS[event["type"]].model_validate(event)
            synth = [e for e in events if e["type"] == "synth.done"]
            done = next(e for e in events if e["type"] == "turn.done")
            if len(synth) != 1 or done["status"] != "done":
                problems.append(f"{name}: turn {done['turn_id']} ended {done['status']} with {len(synth)} replies")
                continue
            outcome.fallback += synth[0]["fallback"]
            outcome.delivered += not synth[0]["fallback"]
            outcome.degraded += done["degraded"]
            outcome.notices += any(e["type"] == "service.degraded" for e in events)
            outcome.seconds.append(seconds)
        session_ids = [s.pk for s in sessions]
        turns = await sync_to_async(lambda ids=session_ids: list(Turn.objects.filter(session_id__in=ids)))()
        for turn in turns:
            assert turn.status == TurnStatus.DONE, (name, turn.pk, turn.status)
            assert turn.finished_at is not None
            took = (turn.finished_at - turn.started_at).total_seconds()
            if took > DEADLINE_S + GRACE_S:
                problems.append(f"{name}: turn {turn.pk} took {took:.1f} s")
        checked, invalid = await sync_to_async(stored_outputs_are_valid)(session_ids)
        problems += [f"{name}: stored as valid but is not: {msg}" for msg in invalid]
        print(f"  {name}: {checked} succeeded runs re-validated")
        await asyncio.to_thread(wait_quiet, live_sim)

    print(f"\nfault matrix: {TURNS_PER_FAULT} concurrent turns per fault, deadline {DEADLINE_S:.0f} s")
    print(f"{'fault':<15}{'delivered':>10}{'fallback':>10}{'degraded':>10}{'notice':>8}{'max s':>8}")
    for name, o in table.items():
        longest = max(o.seconds, default=0.0)
        print(f"{name:<15}{o.delivered:>10}{o.fallback:>10}{o.degraded:>10}{o.notices:>8}{longest:>8.1f}")
    assert problems == []
    for name, o in table.items():
        assert o.delivered + o.fallback == TURNS_PER_FAULT, name
        assert max(o.seconds) <= DEADLINE_S + GRACE_S, name
    # Notices count only those seen before turn.done: where every call fails at once (400, 429)
    # the fallback can beat Coach's own failure to the socket.
    # The matrix can tell faults apart: with no fault every answer is Synth's, and when no
    # agent can ever produce output every answer is the fallback.
    assert table["(none)"].delivered == TURNS_PER_FAULT
    for fault in ("http_500", "http_400", "invalid_json", "hang"):
        assert table[fault].fallback == TURNS_PER_FAULT, fault
    # A dead or failing server opens the breaker, and coachees are told.
    for fault in ("http_500", "timeout"):
        assert table[fault].notices > 0, fault


def wait_quiet(sim: Any, timeout_s: float = 20) -> None:
    """No model call in flight (abandoned hung calls end when their client disconnects)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not [c for c in sim.calls() if c.get("finished_at") is None and not c.get("cancelled")]:
            return
        time.sleep(0.3)
