"""Context budgets with a long memory: every prompt within budget, pinned facts kept, the shared
prefix dominating each call, and a query count per turn that does not grow with the history."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.llm.simulator.server import SimulatorServer
from agents.memory import tokens
from agents.models import Agent, AgentConfig, AgentRun, Turn
from agents.roles import structured
from agents.synthetic import (
    PINNED_BLOCKED_MOVE,
    PINNED_COMMITMENT,
    PINNED_GOAL,
    synthetic_coachee,
    turn_steps_run,
)
from agents.turns import dispatch
from tests.support.config import point_agents_at

pytestmark = pytest.mark.usefixtures("seeded")

# The five LLM calls of a turn that share the prefix.
FIVE_CALLS = [Agent.SHADOW, Agent.PERSONA, Agent.PLASTICITY, Agent.STABILITY, Agent.SYNTH]
CLEAN_CRITIC = {"violated_moves": [], "unsafe_content": [], "explanation": "Nothing blocked is used."}


@pytest.fixture(autouse=True)
def _no_canvas(monkeypatch: pytest.MonkeyPatch) -> None:
    # The steps are run in this process; the Celery canvas must not start too.
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)


@pytest.fixture
def simulated(sim: SimulatorServer) -> SimulatorServer:
    point_agents_at(sim.base_url, kind="vllm")
    # Deterministic where it changes the number of calls: a clean critic means one Synth round.
    sim.configure(agents={"critic": {"script": [CLEAN_CRITIC], "repeat_last": True}})
    tokens.clear_local_cache()
    return sim


def test_thirty_earlier_sessions_stay_within_every_budget_with_pinned_facts(simulated: SimulatorServer) -> None:
    coachee = synthetic_coachee(username="long-memory", earlier_sessions=30, history_messages=40)
    turn_steps_run(coachee.turn.pk)
    turn = Turn.objects.get(pk=coachee.turn.pk)
    assert turn.status == "done"

    # The history really was too long: something had to be left out.
    assert turn.shared_dropped.get("history_messages", 0) + turn.shared_dropped.get("earlier_sessions", 0) > 0
    # Pinned facts survive the cut.
    assert PINNED_GOAL in turn.shared_prompt
    assert PINNED_COMMITMENT in turn.shared_prompt
    assert PINNED_BLOCKED_MOVE in turn.shared_prompt.split("Blocked coaching moves in force:")[1].split("\n")[0]

    budgets = dict(AgentConfig.objects.values_list("agent", "context_budget"))
    runs = {r.agent: r for r in AgentRun.objects.filter(turn=turn, round=1)}
    for agent in [*FIVE_CALLS, Agent.CRITIC]:
        run = runs[agent]
        assert run.status == "succeeded", (agent, run.error)
        # Measured by the builder with the model's tokenizer, and by the server itself.
        assert run.context_tokens is not None
        assert run.context_tokens <= budgets[agent], agent
        assert run.prompt_tokens is not None
        assert run.prompt_tokens <= budgets[agent], agent
        assert "over_budget_by" not in run.context_dropped
    for agent in FIVE_CALLS:
        run = runs[agent]
        share = run.context_dropped["shared_tokens"] / run.context_tokens
        assert share >= 0.8, (agent, round(share, 3))

    assert turn.shared_tokens is not None
    assert turn.shared_tokens <= int(min(budgets[a] for a in FIVE_CALLS) * 0.81)


def test_the_shared_prefix_is_identical_for_every_agent_of_a_turn(
    simulated: SimulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    coachee = synthetic_coachee(username="prefix", earlier_sessions=5, history_messages=10)
    seen: list[list[dict[str, str]]] = []
    original = structured.complete_structured

    def spy(**kwargs: Any) -> Any:
        seen.append(kwargs["messages"])
        return original(**kwargs)

    monkeypatch.setattr(structured, "complete_structured", spy)
    turn_steps_run(coachee.turn.pk)
    turn = Turn.objects.get(pk=coachee.turn.pk)
    assert len(seen) >= 6
    assert {m[0]["content"] for m in seen} == {turn.shared_prompt}
    assert all(m[0]["role"] == "system" for m in seen)


def _turn_queries(sim: SimulatorServer, *, username: str, earlier_sessions: int, history: int) -> list[str]:
    coachee = synthetic_coachee(username=username, earlier_sessions=earlier_sessions, history_messages=history)
    sim.reset()  # the same call indices, so the simulated outputs have the same shape
    sim.configure(agents={"critic": {"script": [CLEAN_CRITIC], "repeat_last": True}})
    with CaptureQueriesContext(connection) as queries:
        turn_steps_run(coachee.turn.pk)
    assert Turn.objects.get(pk=coachee.turn.pk).status == "done"
    return [q["sql"] for q in queries.captured_queries]


def test_queries_per_turn_do_not_grow_with_sessions_or_messages(simulated: SimulatorServer) -> None:
    small = _turn_queries(simulated, username="small", earlier_sessions=2, history=4)
    large = _turn_queries(simulated, username="large", earlier_sessions=30, history=80)
    # The large session's history no longer fits its prefix: one query more asks whether that
    # part has had a summary attempt (summaries.in_session_compaction_schedule). Nothing grows.
    assert len(large) == len(small) + 1, (len(small), len(large))
    # The shared context is built once per turn (by Shadow), not in each of the five steps:
    # the summaries are read by one query in the whole turn.
    summary_reads = [q for q in large if 'FROM "agents_sessionsummary"' in q and q.lstrip().startswith("SELECT")]
    # This session's in-session summary, earlier sessions' ones, and the attempt asked about.
    assert len(summary_reads) == 3, summary_reads


def test_the_context_figure_command_prints_bounded_prompt_tokens(settings: Any) -> None:
    settings.COACHING_LLM_ALLOW_REQUESTS = True
    out = StringIO()
    call_command("context_figure", "--sessions", "1,10,50", "--history", "30", "--json", stdout=out)
    rows = json.loads(out.getvalue())
    assert [r["earlier_sessions"] for r in rows] == [1, 10, 50]
    for row in rows:
        assert row["within_budgets"], row
    # Bounded: 50 earlier sessions cost no more than the budgets allow, not 50x one session.
    totals = [r["turn_prompt_tokens"] for r in rows]
    budget_total = sum(a["budget"] for a in rows[0]["agents"].values())
    assert max(totals) <= budget_total
    assert rows[2]["dropped"].get("earlier_sessions", 0) > 0
    # Rolled back: nothing of the synthetic coachees is left.
    from django.contrib.auth import get_user_model

    assert not get_user_model().objects.filter(username__startswith="figure-").exists()
