"""The operators' "last hour per agent" page: figures computed from AgentRun rows, the same
outcome sorting as the metrics, and only operators (and platform admins) may see it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from agents.models import AgentRun, RunStatus, Turn
from agents.observability import stats
from tests.support.people import make_coachee, make_operator, make_platform_admin

URL = "/admin/agents/agentconfig/last-hour/"


def add_run(turn: Turn, agent: str, round: int, **fields: Any) -> AgentRun:
    return AgentRun.objects.create(turn=turn, agent=agent, round=round, **fields)


@pytest.fixture
def runs(turn: Turn) -> Turn:
    """Synth: five finished runs of known latency, one repaired, two failures, one running;
    Shadow: one run, over an hour ago (outside the window)."""
    ok = {"status": RunStatus.SUCCEEDED}
    add_run(turn, "synth", 1, latency_ms=100, prompt_tokens=50, completion_tokens=10, **ok)
    add_run(turn, "synth", 2, latency_ms=200, prompt_tokens=50, completion_tokens=10, validation_errors=["x"], **ok)
    add_run(turn, "synth", 3, latency_ms=300, status=RunStatus.FAILED, error="llm_bad_output: no valid output")
    add_run(turn, "synth", 4, latency_ms=400, status=RunStatus.FAILED, error="llm_unavailable: model server timed out")
    add_run(turn, "synth", 5, latency_ms=5000, **ok)
    add_run(turn, "synth", 6)  # still running
    old = add_run(turn, "shadow", 9, latency_ms=9, **ok)
    AgentRun.objects.filter(pk=old.pk).update(started_at=timezone.now() - timedelta(hours=2))
    return turn


def test_the_last_hour_is_computed_from_the_runs(runs: Turn) -> None:
    (synth,) = [hour for hour in stats.last_hour() if hour.agent == "synth"]
    assert (synth.runs, synth.running, synth.finished) == (6, 1, 5)
    assert synth.p50_ms == 300
    assert synth.p95_ms == 5000
    assert synth.outcomes["succeeded"] == 2
    assert synth.outcomes["repaired"] == 1
    assert synth.outcomes["invalid"] == 1
    assert synth.outcomes["timed_out"] == 1
    assert synth.valid_pct == 60
    assert synth.failures == 2
    assert (synth.prompt_tokens, synth.completion_tokens) == (100, 20)
    assert "shadow" not in {hour.agent for hour in stats.last_hour()}
    assert sorted(stats.failure_reasons()) == [("synth", "llm_bad_output", 1), ("synth", "llm_unavailable", 1)]


def test_percentiles_are_nearest_rank() -> None:
    assert stats.percentile([], 50) is None
    assert stats.percentile([7], 95) == 7
    assert stats.percentile(list(range(1, 101)), 50) == 50
    assert stats.percentile(list(range(1, 101)), 95) == 95


def test_operators_see_the_page(runs: Turn) -> None:
    for user in (make_operator(), make_platform_admin()):
        client = Client()
        client.force_login(user)
        response = client.get(URL)
        assert response.status_code == 200, user.username
        page = response.content.decode()
        assert 'data-agent="synth"' in page
        assert "5000 ms" in page
        assert "60 %" in page
        assert "llm_bad_output" in page
        # Figures only: nothing of the conversation.
        assert runs.user_message.text not in page
    listing = client.get("/admin/agents/agentconfig/")
    assert "Last hour per agent" in listing.content.decode()


def test_coaches_and_coachees_do_not(runs: Turn) -> None:
    coach = make_coachee("coach-1")
    coach.is_staff = True
    coach.save()
    coach.groups.add(Group.objects.get(name="coaches"))
    client = Client()
    client.force_login(coach)
    assert client.get(URL).status_code == 403
    client = Client()
    client.force_login(make_coachee("someone"))
    response = client.get(URL)
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
