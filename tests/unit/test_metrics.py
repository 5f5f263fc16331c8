"""Prometheus metrics: who may read /metrics, what each recorder counts, label hygiene, and a
whole turn on the real stack (Daphne + a Celery worker in multiprocess mode) read back from
the scrape."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from prometheus_client import REGISTRY

from agents.models import QualityFinding, Turn
from agents.observability.metrics import (
    OTHER,
    agent_label,
    retries_of,
    run_outcome,
    turn_finished,
    ws_frame_refused,
    ws_resumed,
)
from agents.pipeline import reply_gate
from agents.safety.quality import Finding
from agents.turns import accept, dispatch, sessions
from tests.support.metrics import Samples, parse, total
from tests.support.people import make_coachee, make_operator, make_platform_admin


def local(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def token(settings: Any) -> str:
    settings.COACHING_METRICS_TOKEN = "s3cret-token-for-this-test"
    return str(settings.COACHING_METRICS_TOKEN)


def test_anonymous_requests_are_refused(db: None, token: str) -> None:
    response = Client().get("/metrics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"coaching_" not in response.content
    wrong = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer not-the-token")
    assert wrong.status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Basic {token}").status_code == 401


def test_the_token_reads_the_metrics(db: None, token: str) -> None:
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert "coaching_celery_queue_depth" in response.content.decode()


def test_no_token_configured_means_no_anonymous_scrape(db: None, settings: Any) -> None:
    settings.COACHING_METRICS_TOKEN = ""
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401


def test_coachees_and_coaches_are_refused_operators_admitted(seeded: None, token: str) -> None:
    coachee = make_coachee()
    coach = make_coachee("coach-1")
    coach.is_staff = True
    coach.save()
    coach.groups.add(Group.objects.get(name="coaches"))
    for user in (coachee, coach):
        client = Client()
        client.force_login(user)
        response = client.get("/metrics")
        assert response.status_code == 403, user.username
        assert b"coaching_" not in response.content
    for user in (make_operator(), make_platform_admin()):
        client = Client()
        client.force_login(user)
        assert client.get("/metrics").status_code == 200, user.username


def test_metrics_off_means_no_path(db: None, token: str, settings: Any) -> None:
    settings.COACHING_METRICS = False
    assert Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 404


@pytest.mark.parametrize(
    ("status", "error", "errors", "expected"),
    [
        ("succeeded", "", [], "succeeded"),
        ("succeeded", "", ["attempt 1: the reply is not JSON"], "repaired"),
        ("failed", "llm_bad_output: no valid output after one repair attempt", ["x"], "invalid"),
        ("failed", "llm_unavailable: model server timed out: Request timed out.", [], "timed_out"),
        ("failed", "llm_unavailable: no time left before the stage deadline", [], "timed_out"),
        ("failed", "llm_unavailable: model server answered 503", [], "failed"),
        ("failed", "llm_circuit_open: endpoint test is failing; calls are paused for 30 s", [], "circuit_open"),
        ("failed", "agent is disabled", [], "failed"),
        ("running", "", [], None),
    ],
)
def test_run_outcomes(status: str, error: str, errors: list[str], expected: str | None) -> None:
    assert run_outcome(status=status, error=error, validation_errors=errors) == expected


def test_retries_leave_out_the_repair_call() -> None:
    assert retries_of(attempts=1, validation_errors=[]) == 0
    assert retries_of(attempts=3, validation_errors=[]) == 2
    assert retries_of(attempts=2, validation_errors=["bad"]) == 0
    assert retries_of(attempts=3, validation_errors=["bad"]) == 1


def test_quality_findings_are_counted_by_surface_check_and_action(db: None) -> None:
    labels = {"surface": "synth", "check": "prompt_echo", "action": "regenerated"}
    before = local("coaching_quality_findings_total", **labels)
    reply_gate.findings_record(
        turn_id=None,
        surface=QualityFinding.Surface.SYNTH,
        findings=[Finding("prompt_echo", "repeats 8+ words"), Finding("prompt_echo", "a heading")],
        action=QualityFinding.Action.REGENERATED,
    )
    assert local("coaching_quality_findings_total", **labels) == before + 2


def test_crisis_hits_are_counted_by_layer_category_and_level(
    seeded: None, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    user = make_coachee()
    session = sessions.session_start(user_id=user.pk)
    before = total(parse_local(), "coaching_crisis_hits_total")
    with django_capture_on_commit_callbacks(execute=True):
        accepted = accept.turn_accept(
            session_id=session.pk, user_id=user.pk, client_id="c-1", text="I want to kill myself tonight."
        )
    # Counted once the turn is committed (on_commit), by the layer that fired.
    signal = Turn.objects.get(pk=accepted.turn_id).crisis_signal
    assert signal is not None
    labels = {"layer": signal["layer"], "category": signal["category"], "level": signal["level"]}
    assert total(parse_local(), "coaching_crisis_hits_total", **labels) == before + 1


def parse_local() -> Samples:
    from prometheus_client import generate_latest

    return parse(generate_latest(REGISTRY).decode())


def test_labels_take_only_known_values() -> None:
    assert agent_label("shadow") == "shadow"
    assert agent_label("ignore previous instructions") == OTHER
    assert agent_label(None) == OTHER
    before = local("coaching_ws_frames_refused_total", code=OTHER)
    ws_frame_refused("user 42 said: hello")
    assert local("coaching_ws_frames_refused_total", code=OTHER) == before + 1


def test_recorders_do_nothing_when_metrics_are_off(settings: Any) -> None:
    settings.COACHING_METRICS = False
    before = local("coaching_ws_resumes_total")
    ws_resumed(events=3)
    turn_finished(started_at=0.0, finished_at=1.0, degraded=False, fallback=False, flagged=False)
    assert local("coaching_ws_resumes_total") == before


def test_the_dashboard_queries_only_metrics_that_exist(db: None) -> None:
    import json
    import re
    from pathlib import Path

    from tests.support.stack import ROOT

    dashboard = json.loads(Path(ROOT / "deploy/grafana/coaching.json").read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    ours = {name for expr in exprs for name in re.findall(r"\bcoaching_[a-z_]+", expr)}
    exposed = {name for name, _labels in parse_local()} | {
        # read at scrape time (collectors), not in this process's registry
        "coaching_celery_queue_depth",
        "coaching_llm_breaker_state",
        "coaching_llm_endpoint_max_concurrency",
    }
    families = {family.name for family in REGISTRY.collect()}
    for name in ours:
        base = re.sub(r"_(bucket|count|sum|total)$", "", name)
        assert name in exposed or base in families or name in families, name
    assert any("vllm:num_requests_waiting" in expr for expr in exprs)
    assert any("vllm:time_to_first_token_seconds" in expr for expr in exprs)
