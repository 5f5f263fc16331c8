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
from django.db.models import Sum

from agents.models import AgentRun, Turn
from agents.turns import event_log
from tests.support.metrics import Samples, parse, total
from tests.support.people import make_coachee
from tests.support.stack import METRICS_TOKEN, LiveStack, run_turn


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
    from tests.support.stack import login_cookie

    cookie = await sync_to_async(login_cookie)("coachee", "pw-for-tests-1")
    assert await asyncio.to_thread(http_status, url, Cookie=cookie) == 403
    assert await asyncio.to_thread(http_status, url, Authorization=f"Bearer {METRICS_TOKEN}") == 200


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
