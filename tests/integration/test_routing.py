"""Role → endpoint routing: fallbacks, the cross-process concurrency limit (Redis lease
semaphore), priorities and per-coachee cache salts. Unit tests first, then the real stack:
Daphne, two Celery worker processes and two simulated model servers."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from agents.chat import coach
from agents.llm.simulator.server import SimulatorServer
from agents.models import (
    Agent,
    AgentConfig,
    AgentFallback,
    AgentRun,
    CoachingSession,
    Message,
    MessageStatus,
    ModelEndpoint,
    RunStatus,
    Turn,
    TurnStatus,
)
from agents.turns.sessions import session_start
from tests.support.config import endpoint_on, point_agents_at
from tests.support.people import make_coachee
from tests.support.stack import (
    OUTPUT_DIR,
    VENV_BIN,
    ChatClient,
    LiveStack,
    flush_test_redis,
    free_port,
    login_cookie,
    stack_env,
    stop_stack,
    wait_http,
    wait_until_quiet,
    wait_worker,
)
from tests.support.stack import ROOT as REPO_ROOT
from tests.support.turns import CLEAN_CRITIC

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
    pytest.mark.usefixtures("close_thread_connections"),
]


def coach_backup_on(server: SimulatorServer) -> None:
    """Coach's first fallback: an endpoint on `server` named coach-backup."""
    backup = endpoint_on(server, "coach-backup")
    AgentFallback.objects.create(config=AgentConfig.objects.get(agent=Agent.COACH), endpoint=backup, position=1)


async def test_two_agents_are_served_by_their_own_endpoints(
    two_worker_stack: LiveStack, routed: None, sim: SimulatorServer, sim_b: SimulatorServer
) -> None:
    b = await sync_to_async(endpoint_on)(sim_b, "second")
    await sync_to_async(AgentConfig.objects.filter(agent__in=[Agent.PERSONA, Agent.SYNTH]).update)(endpoint=b)
    client = await start_turn(two_worker_stack, "routed-1", "I keep planning to run and never do.")
    try:
        await client.until(lambda e: e["type"] == "turn.done", timeout_s=90)
    finally:
        await client.__aexit__()
    on_a = {c["agent"] for c in sim.calls()}
    on_b = {c["agent"] for c in sim_b.calls()}
    assert on_b == {"persona", "synth"}
    assert {"coach", "shadow", "plasticity", "stability", "critic"} <= on_a
    assert not on_a & on_b


@pytest.mark.timeout(300)
async def test_an_endpoint_limit_of_two_holds_across_ten_turns_and_two_workers(
    two_worker_stack: LiveStack, routed: None, sim: SimulatorServer
) -> None:
    endpoint = await sync_to_async(ModelEndpoint.objects.get)(name="test")
    endpoint.max_concurrency = 2
    await sync_to_async(endpoint.save)()
    # Each call lasts ~0.3 s: without the limit, ten turns' trios would overlap far above 2.
    sim.reset()  # restarts the observed maximum (and the profiles: set again below)
    sim.configure(
        default={"ttft_ms": 150, "tokens_per_s": 200, "output_tokens": 30},
        agents={"critic": {"script": [CLEAN_CRITIC], "repeat_last": True}},
    )
    clients = await asyncio.gather(
        *(start_turn(two_worker_stack, f"limit-{i}", f"Turn {i}: I keep skipping my runs.") for i in range(10))
    )
    try:
        await asyncio.gather(*(c.until(lambda e: e["type"] == "turn.done", timeout_s=200) for c in clients))
    finally:
        for c in clients:
            await c.__aexit__()
    seen = sim.concurrency()["max_in_flight"]
    calls = sim.calls()
    workers = [log.name for log in two_worker_stack.logs[:2] if "succeeded in" in log.read_text()]
    print(f"\nendpoint limit 2: observed maximum in flight {seen} over {len(calls)} calls from 10 turns")
    assert seen <= 2
    assert seen == 2  # the limit was reached, so it was what held them back
    assert len(workers) == 2, "both worker processes ran agents"
    done = await Turn.objects.filter(status=TurnStatus.DONE).acount()
    assert done == 10
    waited = await AgentRun.objects.filter(slot_wait_ms__gt=0).acount()
    assert waited > 0, "some calls waited for a slot, and the wait is on their runs"


async def test_coach_falls_back_before_its_first_token(
    two_worker_stack: LiveStack, routed: None, sim: SimulatorServer, sim_b: SimulatorServer
) -> None:
    await sync_to_async(coach_backup_on)(sim_b)
    sim.configure(agents={"coach": {"fault": "http_500"}})
    client = await start_turn(two_worker_stack, "fallback-1", "I want to start running again.")
    try:
        done = await client.until(lambda e: e["type"] == "coach.done", timeout_s=60)
    finally:
        await client.__aexit__()
    assert done["status"] == MessageStatus.COMPLETE
    assert done["text"]
    assert not [e for e in client.events if e["type"] == "error"]
    assert len(sim_b.calls("coach")) == 1
    run = await sync_to_async(AgentRun.objects.select_related("endpoint", "fallback_from").get)(
        agent=Agent.COACH, turn__session__coachee__username="fallback-1"
    )
    assert run.endpoint is not None
    assert run.endpoint.name == "coach-backup"
    assert run.fallback_from is not None
    assert run.fallback_from.name == "test"


async def test_coach_failing_after_its_first_token_shows_an_error_with_retry_not_a_fallback(
    two_worker_stack: LiveStack, routed: None, sim: SimulatorServer, sim_b: SimulatorServer
) -> None:
    await sync_to_async(coach_backup_on)(sim_b)
    # Slow enough that the first words are relayed (once there are enough for the live check,
    # coach_stream.LIVE_CHECK_FIRST_WORDS; the simulator's tokens are words and periods) before the
    # server drops the stream after its twelfth token.
    sim.configure(agents={"coach": {"fault": "drop", "drop_after_tokens": 12, "output_tokens": 30, "tokens_per_s": 15}})
    client = await start_turn(two_worker_stack, "dropped-1", "I want to start running again.")
    try:
        error = await client.until(lambda e: e["type"] == "error" and e.get("turn_id") is not None, timeout_s=60)
    finally:
        await client.__aexit__()
    # The page turns an error with a turn id into a notice with Retry (static/chat/status.js,
    # turnTrouble); the fallback was never asked once a token had been shown.
    assert error["code"] == "llm_unavailable"
    assert error["detail"] == coach.CUT_OFF_ERROR
    assert sim_b.calls("coach") == []
    assert len(sim.calls("coach")) == 1
    deltas = "".join(e["text"] for e in client.events if e["type"] == "coach.delta")
    assert deltas, "the first tokens were streamed before the failure"
    done = next(e for e in client.events if e["type"] == "coach.done")
    # What was shown stays, recorded as failed (not as a complete reply).
    assert done["status"] == MessageStatus.FAILED
    assert done["text"].startswith(deltas)
    message = await sync_to_async(Message.objects.filter(role="coach", session__coachee__username="dropped-1").get)()
    assert message.status == MessageStatus.FAILED
    assert message.text == done["text"]
    run = await sync_to_async(AgentRun.objects.select_related("endpoint").get)(
        agent=Agent.COACH, turn__session__coachee__username="dropped-1"
    )
    assert run.status == RunStatus.FAILED
    assert run.error.startswith("llm_unavailable")
    assert run.endpoint is not None
    assert run.endpoint.name == "test"
    assert run.fallback_from is None

    # A reconnect replays the same: the reply as failed and the error with its Retry.
    session = await sync_to_async(CoachingSession.objects.get)(pk=message.session_id)
    cookie = await sync_to_async(login_cookie)("dropped-1", "pw-for-tests-1")
    async with ChatClient(two_worker_stack, session, cookie) as again:
        await again.send({"type": "resume", "after_seq": 0})
        replayed_error = await again.until(lambda e: e["type"] == "error", timeout_s=30)
    replayed_done = next(e for e in again.events if e["type"] == "coach.done")
    assert replayed_done["status"] == MessageStatus.FAILED
    assert replayed_done["text"] == message.text
    assert replayed_error["detail"] == coach.CUT_OFF_ERROR

    # The coach's review shows it as failed, not as a finished reply.
    def review_page() -> str:
        admin = get_user_model().objects.create_superuser("review-admin", password="pw-for-tests-1")
        browser = Client()
        browser.force_login(admin)
        response = browser.get(reverse("admin:agents_coachingsession_review", args=[message.session_id]))
        assert response.status_code == 200
        return response.content.decode()

    page = await sync_to_async(review_page)()
    assert "Coach · immediate reply (failed)" in page


@pytest.fixture(scope="module")
def two_worker_stack(django_db_setup: None, django_db_blocker: Any) -> Iterator[LiveStack]:
    """Daphne and two Celery worker processes (each with several threads) on the test database."""
    OUTPUT_DIR.mkdir(exist_ok=True)
    flush_test_redis()
    env = stack_env(COACHING_TURN_DEADLINE_S="60")
    port = free_port()
    processes: list[subprocess.Popen[bytes]] = []
    logs = []
    for index in (1, 2):
        log = OUTPUT_DIR / f"routing-worker{index}.log"
        logs.append(log)
        processes.append(
            subprocess.Popen(
                [
                    str(VENV_BIN / "celery"),
                    "-A",
                    "coaching_site",
                    "worker",
                    "-P",
                    "threads",
                    "-c",
                    "6",
                    "-l",
                    "INFO",
                    "--without-gossip",
                    "--without-mingle",
                    "-n",
                    f"routing{index}-{port}@%h",
                ],
                env=env,
                cwd=REPO_ROOT,
                stdout=log.open("wb"),
                stderr=subprocess.STDOUT,
            )
        )
    web_log = OUTPUT_DIR / "routing-web.log"
    logs.append(web_log)
    processes.append(
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "coaching_site.serve",
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "coaching_site.asgi:application",
            ],
            env=env,
            cwd=REPO_ROOT,
            stdout=web_log.open("wb"),
            stderr=subprocess.STDOUT,
        )
    )
    stack = LiveStack(f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}", processes, logs)
    try:
        wait_http(f"{stack.http_url}/healthz", process=processes[-1], log=web_log)
        wait_worker(env)
        yield stack
    finally:
        stop_stack(stack)


async def start_turn(stack: LiveStack, username: str, text: str) -> ChatClient:
    user = await sync_to_async(make_coachee)(username)
    session = await sync_to_async(session_start)(user_id=user.pk)
    cookie = await sync_to_async(login_cookie)(username, "pw-for-tests-1")
    client = ChatClient(stack, session, cookie)
    await client.__aenter__()
    await client.send({"type": "user.message", "client_id": f"c-{username}", "text": text})
    return client


@pytest.fixture
def routed(sim: SimulatorServer, sim_b: SimulatorServer, seeded_tx: None, slots: None) -> Iterator[None]:
    sim_b.reset()
    point_agents_at(sim.base_url)
    for server in (sim, sim_b):
        server.configure(agents={"critic": {"script": [CLEAN_CRITIC], "repeat_last": True}})
    yield
    for server in (sim, sim_b):
        wait_until_quiet(server)
    sim_b.reset()
