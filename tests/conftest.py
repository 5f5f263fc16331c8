"""Shared fixtures: seeded defaults, the simulated model server, and the live stack
(real Daphne and Celery worker processes on the test database and test Redis databases)."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from django.apps import apps as django_apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from agents.chat import throttle
from agents.llm import breaker, limits
from agents.llm.simulator.server import SimulatorServer
from agents.models import AgentConfig, CoachingSession, ModelEndpoint, Turn
from agents.pipeline import runner
from agents.roles import turn_setup
from agents.turns import accept, dispatch, sessions

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
OUTPUT_DIR = ROOT / "test-output"
# Prometheus reads the live stack's /metrics with this (tests/test_metrics.py).
METRICS_TOKEN = "test-metrics-token-0123456789"


def seed_defaults() -> None:
    """The data migrations' seeds, again: transactional tests truncate tables between tests."""
    for migration in (
        "0002_seed_defaults",
        "0004_seed_crisis_resources",
        "0007_seed_crisis_patterns",
        "0013_memory_summaries_predictions",
        "0014_crisis_patterns_batch_2",
        "0018_crisis_languages",
        "0019_answer_token_budgets",
    ):
        importlib.import_module(f"agents.migrations.{migration}").seed(django_apps, None)
    seed_roles()
    # After the roles: it adds the platform administrators and takes endpoint changes from
    # operators, and trusts the seeded embedded endpoint.
    importlib.import_module("agents.migrations.0017_endpoint_trust").seed(django_apps, None)
    importlib.import_module("agents.migrations.0024_replay_jobs_evaluation_sets").grant_evaluation_sets(
        django_apps, None
    )


def seed_roles() -> None:
    """The role groups of migration 0010 (permissions themselves survive a flush: Django
    recreates them after truncating)."""
    from django.contrib.auth.models import Group, Permission

    roles = importlib.import_module("agents.migrations.0010_roles").ROLES
    for name, codenames in roles.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set(Permission.objects.filter(content_type__app_label="agents", codename__in=codenames))


@pytest.fixture(autouse=True)
def _no_model_calls_by_default(settings: Any) -> None:
    # Unit tests cannot reach a model by accident; the simulator fixtures switch it on.
    settings.COACHING_LLM_ALLOW_REQUESTS = False


@pytest.fixture(autouse=True)
def _fresh_address_throttles() -> None:
    # The test client's address: one test's sign-ups and failed logins must not throttle the next.
    for address in ("127.0.0.1", "203.0.113.7", "203.0.113.9", "198.51.100.2", "198.51.100.3"):
        throttle.reset(address)


@pytest.fixture(autouse=True)
def _fresh_turn_cache() -> None:
    # Each test sets up its own agents and prompts: nothing kept from an earlier test's turns.
    turn_setup.clear()


@pytest.fixture
def seeded(db: None) -> None:
    seed_defaults()


@pytest.fixture
def seeded_tx(transactional_db: None) -> None:
    seed_defaults()


@pytest.fixture(scope="session")
def simulator() -> Iterator[SimulatorServer]:
    # Fast default timings: tests check behaviour, the benchmark measures time.
    with SimulatorServer(port=0, ttft_ms=20, tokens_per_s=400, output_tokens=30) as sim:
        yield sim


@pytest.fixture
def sim(simulator: SimulatorServer, settings: Any) -> Iterator[SimulatorServer]:
    """The simulator with a clean script and call log, and model calls allowed."""
    settings.COACHING_LLM_ALLOW_REQUESTS = True
    simulator.reset()
    breaker.reset_all()  # a breaker opened by an earlier test's faults must not fail this one
    # Nor a slot an earlier test's call still holds (a hung call keeps its lease for its whole
    # timeout): under a limit of one it made Coach wait out its turn, so it never called.
    limits.reset_all()
    yield simulator
    simulator.reset()
    breaker.reset_all()
    limits.reset_all()


def point_agents_at(base_url: str, *, kind: str = "vllm", read_timeout_s: float = 30.0) -> ModelEndpoint:
    endpoint, _ = ModelEndpoint.objects.update_or_create(
        name="test",
        defaults={
            "kind": kind,
            "base_url": base_url,
            "model_id": "sim-model",
            "read_timeout_s": read_timeout_s,
            "connect_timeout_s": 2.0,
            # The simulator answers any number of requests at once, as a batching vLLM does; the
            # limit is held across processes now (agents.llm.limits), and 8 would queue the
            # fault matrix's 20 concurrent turns behind each other. Routing tests set their own.
            "max_concurrency": 64,
            # The tests' own simulator: as a platform administrator would mark it.
            "trusted_for_coachee_data": True,
        },
    )
    AgentConfig.objects.update(endpoint=endpoint)
    return endpoint


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_coachee(username: str = "coachee", password: str = "pw-for-tests-1") -> Any:
    user = get_user_model().objects.create_user(username=username, password=password)
    return user


# --- The live stack: Daphne + Celery worker processes --------------------------------


@dataclass
class LiveStack:
    http_url: str
    ws_url: str
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    metrics_dir: Path | None = None

    def log_tail(self, lines: int = 60) -> str:
        out = []
        for path in self.logs:
            text = path.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(out)

    def dump_state(self, label: str) -> str:
        """What each process is doing and what PostgreSQL is waiting on, for a test that gave up
        waiting on the stack: a rare stall leaves evidence (also in test-output/<label>-state.txt)."""
        parts = []
        py_spy = VENV_BIN / "py-spy"
        for proc, log in zip(self.processes, self.logs, strict=True):
            dump = subprocess.run(
                [str(py_spy), "dump", "--pid", str(proc.pid)], capture_output=True, text=True, check=False, timeout=30
            )
            parts.append(f"--- py-spy dump of {log.stem} ({proc.pid})\n")
            parts.append(dump.stdout or dump.stderr)
        with psycopg.connect(stack_env()["DATABASE_URL"]) as conn:
            rows = conn.execute(
                "SELECT pid, state, wait_event_type, wait_event, now() - xact_start, left(query, 160)"
                " FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND state <> 'idle' ORDER BY xact_start"
            ).fetchall()
        parts.append("--- PostgreSQL sessions not idle\n" + "\n".join(" | ".join(map(str, row)) for row in rows))
        text = "\n".join(parts)
        (OUTPUT_DIR / f"{label}-state.txt").write_text(text)
        return text


def _wait_http(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with suppress(OSError), urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 (local server)
            if response.status == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout_s} s")


def _wait_worker(env: dict[str, str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ping = subprocess.run(
            [str(VENV_BIN / "celery"), "-A", "coaching_site", "inspect", "ping", "--timeout", "1"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            cwd=ROOT,
        )
        if ping.returncode == 0 and "pong" in ping.stdout:
            return
        time.sleep(0.5)
    raise RuntimeError("the Celery worker did not answer pings")


def stack_env(**overrides: str) -> dict[str, str]:
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "coaching_site.settings_test",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}/{db['NAME']}",
        "PYTHONUNBUFFERED": "1",
    }
    env.update(overrides)
    return env


def flush_test_redis() -> None:
    base = settings.REDIS_DB_BASE
    for offset in range(4):
        redis.Redis.from_url(f"{settings.REDIS_URL}/{base + offset}").flushdb()


@pytest.fixture(scope="session")
def start_stack(django_db_setup: None, django_db_blocker: Any) -> Iterator[Callable[..., LiveStack]]:
    """Start Daphne and a Celery worker against the test database; stopped at the end."""
    started: list[LiveStack] = []
    OUTPUT_DIR.mkdir(exist_ok=True)

    def start(*, deadline_s: float = 20.0, name: str = "stack", concurrency: int = 12) -> LiveStack:
        flush_test_redis()
        # prometheus_client's multiprocess directory: the worker's and Daphne's samples, added
        # up by the scrape; emptied per start, as the run script does.
        metrics_dir = OUTPUT_DIR / f"{name}-metrics"
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir(parents=True)
        env = stack_env(
            COACHING_TURN_DEADLINE_S=str(deadline_s),
            PROMETHEUS_MULTIPROC_DIR=str(metrics_dir),
            COACHING_METRICS_TOKEN=METRICS_TOKEN,
        )
        port = free_port()
        worker_log = OUTPUT_DIR / f"{name}-worker.log"
        web_log = OUTPUT_DIR / f"{name}-web.log"
        worker = subprocess.Popen(
            [
                str(VENV_BIN / "celery"), "-A", "coaching_site", "worker", "-P", "threads", "-c", str(concurrency),
                "-l", "INFO", "--without-gossip", "--without-mingle", "-n", f"{name}-{port}@%h",
            ],
            env=env, cwd=ROOT, stdout=worker_log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        web = subprocess.Popen(
            # Daphne through coaching_site.serve: oversized frames get a 1009 close, not a drop.
            [sys.executable, "-m", "coaching_site.serve", "-b", "127.0.0.1", "-p", str(port),
             "coaching_site.asgi:application"],
            env=env, cwd=ROOT, stdout=web_log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        stack = LiveStack(
            f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}", [worker, web], [worker_log, web_log], metrics_dir
        )
        started.append(stack)
        _wait_http(f"{stack.http_url}/healthz", 30)
        _wait_worker(env, 60)
        return stack

    yield start
    for stack in started:
        stop_stack(stack)


def stop_stack(stack: LiveStack) -> None:
    for proc in stack.processes:
        with suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
    for proc in stack.processes:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def live_stack(start_stack: Callable[..., LiveStack]) -> LiveStack:
    return start_stack(name="stack")


CLEAN_CRITIC = {"violated_moves": [], "unsafe_content": [], "explanation": "Nothing to object to."}


@pytest.fixture
def live_sim(sim: SimulatorServer, seeded_tx: None) -> Iterator[SimulatorServer]:
    """The simulator behind every agent. The critic approves unless a test scripts it
    otherwise: generated (random) verdicts would fail the gate at random."""
    point_agents_at(sim.base_url)
    sim.configure(agents={"critic": {"script": [CLEAN_CRITIC], "repeat_last": True}})
    yield sim
    wait_until_quiet(sim)


def wait_until_quiet(sim: SimulatorServer, timeout_s: float = 30) -> None:
    """Let work a test left behind (a stopped turn's agents) finish before the tables are
    truncated under it: no model call in flight, twice in a row."""
    deadline = time.monotonic() + timeout_s
    quiet = 0
    while time.monotonic() < deadline and quiet < 2:
        in_flight = [c for c in sim.calls() if c.get("finished_at") is None]
        quiet = 0 if in_flight else quiet + 1
        time.sleep(0.3)


@pytest.fixture
async def close_thread_connections() -> Any:
    """Close the DB connection of the thread sync_to_async uses, so the test database
    can be dropped at the end of the session."""
    yield
    from asgiref.sync import sync_to_async
    from django.db import connections

    await sync_to_async(connections.close_all)()


# --- A WebSocket client for the live stack -------------------------------------------


def login_cookie(username: str, password: str) -> str:
    # force_login: login throttling (django-axes) needs the request, which Client.login() does
    # not pass; browser tests log in through the real form instead.
    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


class ChatClient:
    """A real WebSocket client (the `websockets` package) speaking the chat protocol."""

    def __init__(self, stack: LiveStack, session: CoachingSession, cookie: str) -> None:
        self.url = f"{stack.ws_url}/ws/sessions/{session.pk}/"
        self.origin = stack.http_url
        self.cookie = cookie
        self.events: list[dict[str, Any]] = []
        self.ws: Any = None

    async def __aenter__(self) -> ChatClient:
        from websockets.asyncio.client import connect
        from websockets.typing import Origin

        self.ws = await connect(self.url, origin=Origin(self.origin), additional_headers={"Cookie": self.cookie})
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()

    async def send(self, frame: dict[str, Any] | str) -> None:
        await self.ws.send(frame if isinstance(frame, str) else json.dumps(frame))

    async def next_event(self, timeout_s: float = 30) -> dict[str, Any]:
        event: dict[str, Any] = json.loads(await asyncio.wait_for(self.ws.recv(), timeout_s))
        self.events.append(event)
        return event

    async def until(self, predicate: Callable[[dict[str, Any]], bool], timeout_s: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no matching event; saw {[e['type'] for e in self.events]}")
            event = await self.next_event(remaining)
            if predicate(event):
                return event


def which(name: str) -> str | None:
    return shutil.which(name)


@pytest.fixture
def turn(seeded: None, sim: SimulatorServer, monkeypatch: pytest.MonkeyPatch) -> Turn:
    """A running turn for one coachee message, with every agent pointed at the simulator."""
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    point_agents_at(sim.base_url)
    sim.configure(default={"ttft_ms": 0, "tokens_per_s": 0})  # behaviour, not timing
    user = make_coachee()
    session = sessions.session_start(user_id=user.pk)
    accepted = accept.turn_accept(
        session_id=session.pk, user_id=user.pk, client_id="c-1", text="I keep skipping my runs."
    )
    return runner.load_turn(accepted.turn_id)
