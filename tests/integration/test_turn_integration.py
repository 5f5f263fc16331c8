"""A whole turn on the real stack: Daphne, a Celery worker process, PostgreSQL, Redis, and
the simulated model server, driven by a real WebSocket client."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
import redis
from asgiref.sync import sync_to_async
from django.conf import settings

from agents import tasks
from agents.models import AgentRun, Conflict, Message, RunStatus, SessionEvent, Turn, TurnStatus
from agents.roles.schemas import SERVER_EVENTS
from tests.support.config import point_agents_at
from tests.support.stack import LiveStack, run_turn

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(180),
    pytest.mark.usefixtures("close_thread_connections"),
]


SHARED_MOVE = "direct_challenge"  # suggested by Plasticity, blocked by Stability


def script_conflict(sim: Any) -> None:
    # Specialists answer a little slowly, so their overlap in time is unmistakable.
    specialist = {"ttft_ms": 300, "tokens_per_s": 400}
    sim.configure(
        agents={
            "persona": specialist,
            "plasticity": {
                **specialist,
                "script": [
                    {
                        "preferences": {"directness": 4, "warmth": 3, "structure": 3, "challenge": 4, "pacing": 3},
                        "strategy": "challenge",
                        "suggested_moves": [SHARED_MOVE, "tiny_next_step"],
                        "rationale": "They respond to directness.",
                    }
                ],
            },
            "stability": {
                **specialist,
                "script": [
                    {
                        "risks": [{"description": "Exhaustion", "severity": 4, "detectability": 3, "reversibility": 2}],
                        "blocked_moves": [SHARED_MOVE],
                        "escalation": "monitor",
                        "rationale": "Signs of strain.",
                    }
                ],
            },
            "synth": {
                # First answer declares the blocked move (refused by validation), the repair does not.
                "script": [
                    {
                        "reply": "Let's push hard on this goal today.",
                        "moves_used": [SHARED_MOVE],
                        "signals_used": ["stability"],
                        "signals_missing": [],
                    },
                    {
                        "reply": "One **small** step: what could you do tomorrow?",
                        "moves_used": ["tiny_next_step"],
                        "signals_used": ["plasticity", "stability"],
                        "signals_missing": [],
                    },
                ]
            },
            "critic": {"script": [{"violated_moves": [], "unsafe_content": [], "explanation": "Fine."}]},
        }
    )


def assert_valid_events(events: list[dict[str, Any]]) -> None:
    for event in events:
        SERVER_EVENTS[event["type"]].model_validate(event)


async def test_whole_turn_runs_every_agent_in_order(live_stack: LiveStack, live_sim: Any) -> None:
    script_conflict(live_sim)
    session, client = await run_turn(live_stack)
    try:
        await client.until(lambda e: e["type"] == "turn.done", timeout_s=60)
    finally:
        await client.__aexit__()
    assert_valid_events(client.events)

    # Each persisted event arrived exactly once, and the sequence has no gaps. (Events from
    # Daphne and the worker may cross on the wire; the client applies them in seq order.)
    sequenced = sorted((e for e in client.events if "seq" in e), key=lambda e: e["seq"])
    seqs = [e["seq"] for e in sequenced]
    assert seqs == list(range(1, len(seqs) + 1))
    # Event order: ack first, Coach streams, the full answer, then the end of the turn.
    types = [e["type"] for e in sequenced]
    assert types[0] == "message.accepted"
    assert types.index("coach.started") < types.index("coach.done")
    assert types.index("synth.done") < types.index("turn.done") == len(types) - 1
    arrival = [e["type"] for e in client.events]
    assert arrival.index("coach.started") < arrival.index("coach.delta") < arrival.index("coach.done")
    # Agent progress is live only (no seq): Shadow reports first, before any specialist.
    assert "agent.status" not in types
    statuses = [(e["agent"], e["state"]) for e in client.events if e["type"] == "agent.status"]
    assert statuses[:2] == [("shadow", "started"), ("shadow", "succeeded")]
    assert {agent for agent, _ in statuses} == {"shadow", "persona", "plasticity", "stability", "synth", "critic"}
    coach_text = "".join(e["text"] for e in client.events if e["type"] == "coach.delta")
    assert coach_text == next(e["text"] for e in client.events if e["type"] == "coach.done")

    turn = await sync_to_async(Turn.objects.get)(session=session)
    runs = await sync_to_async(lambda: {(r.agent, r.round): r for r in AgentRun.objects.filter(turn=turn)})()
    assert turn.status == TurnStatus.DONE
    assert not turn.degraded

    # Six agents ran and recorded tokens and latency.
    for agent in ("coach", "shadow", "persona", "plasticity", "stability", "synth"):
        run = runs[(agent, 1)]
        assert run.status == RunStatus.SUCCEEDED, (agent, run.error)
        assert run.prompt_tokens, agent
        assert run.completion_tokens, agent
        assert run.latency_ms is not None, agent
        assert run.prompt_version_id is not None
        # What each prompt cost against its budget, and the shared prefix's part of it.
        assert run.context_tokens, agent
        assert 0 < run.context_dropped["shared_tokens"] < run.context_tokens, agent

    # Shadow finished before any specialist started; the three overlapped.
    trio = [runs[(a, 1)] for a in ("persona", "plasticity", "stability")]
    shadow_finished = runs[("shadow", 1)].finished_at
    trio_finished = [r.finished_at for r in trio if r.finished_at is not None]
    assert shadow_finished is not None
    assert len(trio_finished) == 3
    assert shadow_finished <= min(r.started_at for r in trio)
    assert max(r.started_at for r in trio) < min(trio_finished)

    # The clash was decided by code and recorded; the blocked move never reached Synth's answer.
    synth = runs[("synth", 1)]
    assert synth.attempts == 2  # the first answer declared the blocked move and was repaired
    assert synth.parsed_output is not None
    assert turn.brief is not None
    assert SHARED_MOVE not in synth.parsed_output["moves_used"]
    assert SHARED_MOVE in turn.brief["blocked_moves"]
    conflicts = await sync_to_async(lambda: list(Conflict.objects.filter(turn=turn).values_list("rule", flat=True)))()
    assert "blocked_move_dropped" in conflicts
    assert "high_risk_overrides_push" in conflicts

    # One message of each kind, no duplicates.
    roles = await sync_to_async(lambda: list(Message.objects.filter(session=session).values_list("role", flat=True)))()
    assert sorted(roles) == ["coach", "synth", "user"]


async def test_specialist_invalid_json_twice_degrades_the_turn(live_stack: LiveStack, live_sim: Any) -> None:
    live_sim.configure(agents={"persona": {"fault": "invalid_json", "fault_times": 2}})
    session, client = await run_turn(live_stack)
    try:
        done = await client.until(lambda e: e["type"] == "turn.done", timeout_s=60)
    finally:
        await client.__aexit__()
    assert done["degraded"] is True
    assert "persona" in done["missing"]
    assert any(e["type"] == "synth.done" and not e["fallback"] for e in client.events)
    persona = await sync_to_async(AgentRun.objects.get)(turn__session=session, agent="persona")
    assert persona.status == RunStatus.FAILED
    assert persona.attempts == 2
    assert len(persona.validation_errors) >= 2


async def test_endpoint_down_gives_a_clear_error_and_keeps_the_message(live_stack: LiveStack, live_sim: Any) -> None:
    await sync_to_async(point_agents_at)("http://127.0.0.1:9/v1")  # nothing listens on the discard port
    session, client = await run_turn(live_stack, text="Is anyone there?")
    try:
        error = await client.until(lambda e: e["type"] == "error", timeout_s=30)
        done = await client.until(lambda e: e["type"] == "turn.done", timeout_s=60)
    finally:
        await client.__aexit__()
    assert error["code"] == "llm_unavailable"
    assert "saved" in error["detail"]
    assert done["degraded"] is True
    synth = next(e for e in client.events if e["type"] == "synth.done")
    assert synth["fallback"] is True
    stored = Message.objects.filter(session=session, role="user", text="Is anyone there?")
    assert await sync_to_async(stored.count)() == 1


async def test_hung_specialist_still_ends_the_turn_by_its_deadline(live_stack: LiveStack, live_sim: Any) -> None:
    live_sim.configure(agents={"stability": {"fault": "hang"}})
    session, client = await run_turn(live_stack)
    try:
        done = await client.until(lambda e: e["type"] == "turn.done", timeout_s=40)
    finally:
        await client.__aexit__()
    turn = await sync_to_async(Turn.objects.get)(session=session)
    assert turn.finished_at is not None
    assert turn.finished_at <= turn.deadline_at
    assert done["degraded"] is True
    assert "stability" in done["missing"]
    # Without Stability, Synth got the conservative brief: no pushing moves allowed.
    assert turn.brief is not None
    assert turn.brief["strategy"] == "support"


async def test_redelivered_tasks_change_nothing(live_stack: LiveStack, live_sim: Any) -> None:
    session, client = await run_turn(live_stack)
    try:
        await client.until(lambda e: e["type"] == "turn.done", timeout_s=60)
    finally:
        await client.__aexit__()
    turn = await sync_to_async(Turn.objects.get)(session=session)

    def counts() -> tuple[int, int, int]:
        return (
            AgentRun.objects.filter(turn=turn).count(),
            Message.objects.filter(session=session).count(),
            SessionEvent.objects.filter(session=session).count(),
        )

    before = await sync_to_async(counts)()
    calls_before = len(live_sim.calls())
    # The same messages again, through the broker to the real worker.
    results = [
        tasks.shadow_task.delay(turn.pk),
        tasks.specialist_task.delay(turn.pk, "persona"),
        tasks.synth_task.delay(turn.pk),
    ]
    for result in results:
        await asyncio.to_thread(result.get, timeout=30)
    assert await sync_to_async(counts)() == before
    assert len(live_sim.calls()) == calls_before


async def test_stop_ends_the_turn_and_nothing_more_arrives(live_stack: LiveStack, live_sim: Any) -> None:
    live_sim.configure(agents={"coach": {"tokens_per_s": 10, "output_tokens": 200}})
    session, client = await run_turn(live_stack)
    try:
        await client.until(lambda e: e["type"] == "coach.delta", timeout_s=20)
        await client.send({"type": "stop"})
        done = await client.until(lambda e: e["type"] == "turn.done", timeout_s=20)
        coach_done = await client.until(lambda e: e["type"] == "coach.done", timeout_s=20)
        await asyncio.sleep(1.0)
    finally:
        await client.__aexit__()
    assert done["status"] == "stopped"
    assert coach_done["status"] == "stopped"
    coach_call = live_sim.calls(agent="coach")[-1]
    assert coach_call["cancelled"] is True  # the upstream stream was closed
    turn = await sync_to_async(Turn.objects.get)(session=session)
    assert turn.status == TurnStatus.STOPPED
    await asyncio.sleep(0.5)
    assert not await sync_to_async(Message.objects.filter(session=session, role="synth").exists)()


async def test_stability_crisis_sends_the_resources_card_before_the_reply(live_stack: LiveStack, live_sim: Any) -> None:
    live_sim.configure(
        agents={
            "stability": {
                "script": [
                    {
                        "risks": [
                            {
                                "description": "Talk of not going on",
                                "severity": 5,
                                "detectability": 4,
                                "reversibility": 5,
                            }
                        ],
                        "blocked_moves": ["direct_challenge", "stretch_goal"],
                        "escalation": "crisis",
                        "rationale": "Possible danger.",
                    }
                ]
            }
        }
    )
    session, client = await run_turn(live_stack, text="Some days I do not see the point of anything.")
    try:
        await client.until(lambda e: e["type"] == "turn.done", timeout_s=60)
    finally:
        await client.__aexit__()
    assert_valid_events(client.events)
    notice = next(e for e in client.events if e["type"] == "safety.notice")
    assert notice["level"] == "crisis"
    assert any("988" in r["contact"] for r in notice["resources"])  # the session's locale is en
    synth = next(e for e in client.events if e["type"] == "synth.done")
    assert notice["seq"] < synth["seq"]
    turn = await sync_to_async(Turn.objects.get)(session=session)
    assert turn.escalation == "crisis"
    assert turn.brief is not None
    assert turn.brief["allowed_moves"] == []


async def test_a_single_slot_server_answers_coach_before_shadow(live_stack: LiveStack, live_sim: Any) -> None:
    def single_slot() -> None:
        point_agents_at(live_sim.base_url).__class__.objects.filter(name="test").update(max_concurrency=1)

    await sync_to_async(single_slot)()
    session, client = await run_turn(live_stack)
    try:
        done = await client.until(lambda e: e["type"] == "turn.done", timeout_s=60)
    finally:
        await client.__aexit__()
    assert done["status"] == "done"
    turn = await sync_to_async(Turn.objects.get)(session=session)
    assert turn.canvas_after_coach is True
    [coach] = live_sim.calls(agent="coach", turn=turn.pk)
    [shadow] = live_sim.calls(agent="shadow", turn=turn.pk)
    assert coach["finished_at"] <= shadow["received_at"]


async def test_message_text_reaches_no_log_task_result_or_validation_error(
    live_stack: LiveStack, live_sim: Any
) -> None:
    canary = f"CANARY-{uuid.uuid4().hex}"
    # Bad output from one agent, so validation errors are recorded too.
    live_sim.configure(agents={"persona": {"fault": "invalid_json", "fault_times": 1}})
    session, client = await run_turn(live_stack, text=f"My private note: {canary}")
    try:
        await client.until(lambda e: e["type"] == "turn.done", timeout_s=60)
    finally:
        await client.__aexit__()
    await asyncio.sleep(1.0)  # let the processes flush their logs

    errors = await sync_to_async(
        lambda: [e for r in AgentRun.objects.filter(turn__session=session) for e in r.validation_errors]
    )()
    assert errors  # the check below looks at real validation errors
    assert all(canary not in e for e in errors)
    for log in live_stack.logs:
        assert canary not in log.read_text(errors="replace"), log.name
    results = redis.Redis.from_url(f"{settings.REDIS_URL}/{settings.REDIS_DB_BASE + 1}")
    keys = list(results.scan_iter("celery-task-meta-*"))
    assert keys  # task results are there to look at
    for key in keys:
        value: bytes = results.get(key) or b""  # type: ignore[assignment]  # redis-py types the sync client as async too
        assert canary.encode() not in value, key
