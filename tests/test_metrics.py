"""Prometheus metrics: who may read /metrics, what each recorder counts, label hygiene, and a
whole turn on the real stack (Daphne + a Celery worker in multiprocess mode) read back from
the scrape."""

from __future__ import annotations

import asyncio
import time
import urllib.request
import uuid
from collections import defaultdict
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.db.models import Sum
from django.test import Client
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from agents.models import AgentRun, QualityFinding, Turn
from agents.observability import metrics
from agents.pipeline import reply_gate
from agents.safety.quality import Finding
from agents.turns import accept, dispatch, event_log, sessions
from tests.conftest import METRICS_TOKEN, LiveStack, make_coachee
from tests.test_prompt_ops import make_operator, make_platform_admin
from tests.test_turn_integration import run_turn

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum of a metric's samples whose labels include these."""
    wanted = set(labels.items())
    return sum(value for (n, lbls), value in samples.items() if n == name and wanted <= set(lbls))


def local(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


# --- Who may read /metrics -------------------------------------------------------------


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


# --- What the recorders count ----------------------------------------------------------


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
    assert metrics.run_outcome(status=status, error=error, validation_errors=errors) == expected


def test_retries_leave_out_the_repair_call() -> None:
    assert metrics.retries_of(attempts=1, validation_errors=[]) == 0
    assert metrics.retries_of(attempts=3, validation_errors=[]) == 2
    assert metrics.retries_of(attempts=2, validation_errors=["bad"]) == 0
    assert metrics.retries_of(attempts=3, validation_errors=["bad"]) == 1


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
    assert metrics.agent_label("shadow") == "shadow"
    assert metrics.agent_label("ignore previous instructions") == metrics.OTHER
    assert metrics.agent_label(None) == metrics.OTHER
    before = local("coaching_ws_frames_refused_total", code=metrics.OTHER)
    metrics.ws_frame_refused("user 42 said: hello")
    assert local("coaching_ws_frames_refused_total", code=metrics.OTHER) == before + 1


def test_recorders_do_nothing_when_metrics_are_off(settings: Any) -> None:
    settings.COACHING_METRICS = False
    before = local("coaching_ws_resumes_total")
    metrics.ws_resumed(events=3)
    metrics.turn_finished(started_at=0.0, finished_at=1.0, degraded=False, fallback=False, flagged=False)
    assert local("coaching_ws_resumes_total") == before


# --- A whole turn on the real stack ----------------------------------------------------

# Label names that would make a metric per person or per conversation.
FORBIDDEN_LABELS = {"user", "user_id", "username", "session", "session_id", "conversation", "turn", "turn_id", "text"}


def scrape(stack: LiveStack) -> str:
    url = f"{stack.http_url}/metrics"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {METRICS_TOKEN}"})  # noqa: S310 (local)
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (the local test server)
        assert response.status == 200
        return str(response.read().decode())


def http_status(url: str, **headers: str) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:  # noqa: S310
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def run_sums(turn_id: int) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
    runs = AgentRun.objects.filter(turn_id=turn_id).exclude(status="running")
    counts: dict[str, int] = defaultdict(int)
    for agent in runs.values_list("agent", flat=True):
        counts[agent] += 1
    tokens = {
        row["agent"]: (row["p"] or 0, row["c"] or 0)
        for row in runs.values("agent").annotate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    }
    return dict(counts), tokens


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
@pytest.mark.usefixtures("close_thread_connections")
async def test_a_turn_on_the_real_stack_shows_in_the_scrape(live_stack: LiveStack, live_sim: Any) -> None:
    # Persona's first call fails (one retry), Stability's first answer is not JSON (repaired).
    live_sim.configure(
        agents={
            "persona": {"fault": "http_500", "times": 1},
            "stability": {"fault": "invalid_json", "times": 1},
        }
    )
    canary = f"canary-{uuid.uuid4().hex}"
    before = parse(await asyncio.to_thread(scrape, live_stack))
    session, client = await run_turn(live_stack, text=f"I keep planning to run and never do. {canary}")
    try:
        done = await client.until(lambda e: e["type"] == "turn.done", timeout_s=60)
        # Coach's stream may end after the full answer (it runs beside the canvas): the resume
        # below must find every event of the turn stored, or it replays one fewer than counted.
        if not any(e["type"] == "coach.done" for e in client.events):
            await client.until(lambda e: e["type"] == "coach.done", timeout_s=30)
        open_now = parse(await asyncio.to_thread(scrape, live_stack))
        await client.send("this is not JSON")
        await client.until(lambda e: e["type"] == "error" and e["code"] == "invalid_frame")
        await client.send({"type": "resume", "after_seq": 0})
        replayed_done = await client.until(lambda e: e["type"] == "turn.done")
        assert replayed_done["turn_id"] == done["turn_id"]
    finally:
        await client.__aexit__()
    turn_id = done["turn_id"]
    turn = await Turn.objects.aget(pk=turn_id)
    counts, tokens = await sync_to_async(run_sums)(turn_id)
    replayed = await sync_to_async(lambda: len(event_log.events_after(session_id=session.pk, after_seq=0)))()

    # Each process records after its own commit: read until Coach, every agent, the turn and the
    # socket's close are all in (they are within milliseconds; the limit is generous).
    deadline = time.monotonic() + 15
    while True:
        text = await asyncio.to_thread(scrape, live_stack)
        after = parse(text)

        def delta(name: str, *, now: Samples = after, **labels: str) -> float:
            return total(now, name, **labels) - total(before, name, **labels)

        settled = (
            delta("coaching_turn_full_answer_seconds_count") == 1
            and delta("coaching_ws_connections_open") == 0
            and all(delta("coaching_agent_runs_total", agent=agent) == n for agent, n in counts.items())
        )
        if settled or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)

    # The turn: one more in each turn histogram, counted as it ended.
    assert delta("coaching_turn_full_answer_seconds_count") == 1
    assert 0 < delta("coaching_turn_full_answer_seconds_sum") <= 20
    assert delta("coaching_turn_first_token_seconds_count") == 1
    assert 0 <= delta("coaching_turn_first_token_seconds_sum") < delta("coaching_turn_full_answer_seconds_sum")
    degraded, flagged = str(turn.degraded).lower(), str(turn.flagged).lower()
    assert delta("coaching_turns_finished_total", degraded=degraded, flagged=flagged, fallback="false") == 1

    # Agents: one run per AgentRun row, by outcome; tokens equal the rows' sums.
    assert set(counts) >= {"coach", "shadow", "persona", "plasticity", "stability", "synth", "critic"}
    for agent, n in counts.items():
        assert delta("coaching_agent_runs_total", agent=agent, endpoint="test") == n, agent
        assert delta("coaching_agent_run_seconds_count", agent=agent) == n, agent
        prompt, completion = tokens[agent]
        assert prompt > 0
        assert delta("coaching_agent_tokens_total", agent=agent, kind="prompt") == prompt, agent
        assert delta("coaching_agent_tokens_total", agent=agent, kind="completion") == completion, agent
    assert delta("coaching_agent_runs_total", agent="stability", outcome="repaired") == 1
    assert delta("coaching_agent_runs_total", agent="shadow", outcome="succeeded") == 1
    assert delta("coaching_agent_retries_total", agent="persona") == 1

    # Model requests: Coach streamed (time to first token), the others did not; none left open.
    assert delta("coaching_llm_time_to_first_token_seconds_count", agent="coach", endpoint="test") == 1
    assert delta("coaching_llm_time_to_first_token_seconds_count", agent="shadow") == 0
    assert delta("coaching_llm_request_seconds_count", agent="persona", result="error") == 1
    assert delta("coaching_llm_request_seconds_count", agent="persona", result="ok") == 1
    assert delta("coaching_llm_request_seconds_count", agent="stability", result="ok") == 2  # answer + repair
    assert total(after, "coaching_llm_requests_in_flight", endpoint="test") == 0
    assert total(after, "coaching_llm_breaker_state", endpoint="test") == 0
    assert total(after, "coaching_llm_endpoint_max_concurrency", endpoint="test") >= 1

    # The socket: open while connected, closed after; the refused frame and the resume.
    assert total(open_now, "coaching_ws_connections_open") - total(before, "coaching_ws_connections_open") == 1
    assert delta("coaching_ws_connects_total", result="accepted") == 1
    assert delta("coaching_ws_frames_refused_total", code="invalid_frame") == 1
    assert delta("coaching_ws_resumes_total") == 1
    assert delta("coaching_ws_replayed_events_total") == replayed > 0

    # Celery: the turn's tasks timed; the queue read from the broker (empty once it is done).
    assert delta("coaching_celery_task_seconds_count", task="coaching.shadow", state="SUCCESS") == 1
    assert delta("coaching_celery_task_seconds_count", task="coaching.synth", state="SUCCESS") == 1
    assert ("coaching_celery_queue_depth", (("queue", "celery"),)) in after
    # django-prometheus: HTTP (the scrapes themselves) and the database, from both processes.
    assert delta("django_http_responses_total_by_status_total", status="200") >= 1
    assert total(after, "django_db_execute_total") > 0

    # Nobody in the labels: no id, name or text of the coachee, and never the message.
    assert canary not in text
    for (_name, labels), _value in after.items():
        for label, value in labels:
            assert label not in FORBIDDEN_LABELS, label
            assert value not in {"coachee", str(session.pk), str(turn_id)} or label == "le", (label, value)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
@pytest.mark.usefixtures("close_thread_connections")
async def test_the_live_path_refuses_anonymous_and_coachee_requests(live_stack: LiveStack, live_sim: Any) -> None:
    url = f"{live_stack.http_url}/metrics"
    assert await asyncio.to_thread(http_status, url) == 401
    assert await asyncio.to_thread(http_status, url, Authorization="Bearer wrong") == 401
    await sync_to_async(make_coachee)()
    from tests.conftest import login_cookie

    cookie = await sync_to_async(login_cookie)("coachee", "pw-for-tests-1")
    assert await asyncio.to_thread(http_status, url, Cookie=cookie) == 403
    assert await asyncio.to_thread(http_status, url, Authorization=f"Bearer {METRICS_TOKEN}") == 200


# --- The shipped dashboard -------------------------------------------------------------


def test_the_dashboard_queries_only_metrics_that_exist(db: None) -> None:
    import json
    import re
    from pathlib import Path

    from tests.conftest import ROOT

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
