"""What one turn's steps share inside a process: read once, never a stopped turn, never required."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.llm.simulator.server import SimulatorServer
from agents.models import AgentRun, PromptVersion, RunStatus, Turn, TurnStatus
from agents.pipeline import steps
from agents.roles import turn_setup

SETUP_TABLES = ("agents_agentconfig", "agents_promptversion", "agents_coachingmove", "agents_modelendpoint")


def _setup_reads(queries: list[dict[str, str]]) -> list[str]:
    return [q["sql"] for q in queries if any(f'FROM "{table}"' in q["sql"] for table in SETUP_TABLES)]


def test_the_trio_reads_no_configuration_after_shadow_in_the_same_process(turn: Turn, sim: SimulatorServer) -> None:
    assert steps.shadow_step(turn_id=turn.pk) == RunStatus.SUCCEEDED
    with CaptureQueriesContext(connection) as captured:
        for agent in ("persona", "plasticity", "stability"):
            assert steps.specialist_step(turn_id=turn.pk, agent=agent) == RunStatus.SUCCEEDED
    assert _setup_reads(captured.captured_queries) == []
    # Nor Shadow's run: its findings were kept by the step that produced them.
    assert not [q for q in captured.captured_queries if "parsed_output" in q["sql"] and "'shadow'" in q["sql"]]
    stability = AgentRun.objects.get(turn=turn, agent="stability")
    assert "Shadow's findings for this message:\n<<<data" in stability.extra_instructions


def test_a_step_in_another_process_reads_everything_from_the_database(turn: Turn, sim: SimulatorServer) -> None:
    assert steps.shadow_step(turn_id=turn.pk) == RunStatus.SUCCEEDED
    turn_setup.clear()  # what a second worker process starts with
    with CaptureQueriesContext(connection) as captured:
        assert steps.specialist_step(turn_id=turn.pk, agent="stability") == RunStatus.SUCCEEDED
    assert _setup_reads(captured.captured_queries)
    stability = AgentRun.objects.get(turn=turn, agent="stability")
    assert "Shadow's findings for this message:\n<<<data" in stability.extra_instructions


def test_a_kept_turn_that_was_stopped_is_not_run(turn: Turn, sim: SimulatorServer) -> None:
    assert steps.shadow_step(turn_id=turn.pk) == RunStatus.SUCCEEDED
    Turn.objects.filter(pk=turn.pk).update(status=TurnStatus.STOPPED)
    assert steps.specialist_step(turn_id=turn.pk, agent="persona") == "skipped"
    assert not AgentRun.objects.filter(turn=turn, agent="persona").exists()


def test_a_turn_keeps_the_prompts_it_started_with(turn: Turn, sim: SimulatorServer) -> None:
    assert steps.shadow_step(turn_id=turn.pk) == RunStatus.SUCCEEDED
    started_with = PromptVersion.objects.get(agent="persona", status="active")
    # An operator activates another version mid-turn: this turn's persona still uses the first.
    PromptVersion.objects.filter(pk=started_with.pk).update(status="retired")
    PromptVersion.objects.create(agent="persona", version=99, body=started_with.body, status="active")
    assert steps.specialist_step(turn_id=turn.pk, agent="persona") == RunStatus.SUCCEEDED
    assert AgentRun.objects.get(turn=turn, agent="persona").prompt_version_id == started_with.pk


def test_the_cache_keeps_only_the_most_recent_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(turn_setup, "TURNS_KEPT", 3)
    monkeypatch.setattr(turn_setup, "setup_load", lambda: turn_setup.TurnSetup({}, {}, {}, []))
    for turn_id in range(1, 6):
        turn_setup.setup_for(turn_id)
    assert list(turn_setup._turns) == [3, 4, 5]
    turn_setup.forget(4)
    assert list(turn_setup._turns) == [3, 5]
