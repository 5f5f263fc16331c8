"""Shared fixtures: seeded defaults, the simulated model server, and the live stack
(real Daphne and Celery worker processes on the test database and test Redis databases)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from django.db import connections

from agents.chat import db as chat_db
from agents.chat import throttle
from agents.llm import breaker, limits
from agents.llm.simulator.server import SimulatorServer
from agents.models import Turn
from agents.pipeline import runner
from agents.roles import turn_setup
from agents.turns import accept, dispatch, sessions
from tests.support import engine
from tests.support.config import point_agents_at, seed_defaults
from tests.support.people import make_coachee
from tests.support.stack import (
    METRICS_TOKEN,
    OUTPUT_DIR,
    ROOT,
    VENV_BIN,
    LiveStack,
    flush_test_redis,
    free_port,
    stack_env,
    stop_stack,
    wait_http,
    wait_until_quiet,
    wait_worker,
)
from tests.support.turns import CLEAN_CRITIC

# Fixtures that tests in every folder share (a plugin, so no test module imports another).
pytest_plugins = ["tests.support.fixtures"]


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def pytest_configure(config: pytest.Config) -> None:
    # A run stopped with SIGTERM (scripts/test.sh stopping its background run) ends as on Ctrl-C:
    # the fixtures' finalizers stop the model server and the stacks they started.
    signal.signal(signal.SIGTERM, _interrupted)


def pytest_collection_finish(session: pytest.Session) -> None:
    # The real model server starts with the session when a test that needs it is selected: its
    # start overlaps the tests before it (tests/support/engine.py).
    if session.config.option.collectonly or os.environ.get("COACHING_TEST_VLLM_URL"):
        return
    if any("vllm_url" in getattr(item, "fixturenames", ()) for item in session.items):
        engine.start_early()


def pytest_sessionfinish(session: pytest.Session) -> None:
    engine.stop_untaken()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None) -> Iterator[None]:
    """pytest-django's, and then, before it drops the test database: close the connections
    other threads hold: the one thread async tests' sync_to_async calls run on (asgiref's
    single-thread executor), and the app's database threads (agents.chat.db), which kept one
    after some consumer tests. Left open, the drop fails ("accessed by other users")."""
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()
    chat_db.close_thread_connections()


@pytest.fixture(autouse=True)
def _no_model_calls_by_default(settings: Any) -> None:
    # Unit tests cannot reach a model by accident; the simulator fixtures switch it on.
    settings.COACHING_LLM_ALLOW_REQUESTS = False


@pytest.fixture(autouse=True)
def _fresh_address_throttles() -> None:
    # The test client's address: one test's sign-ups and failed logins must not throttle the next.
    for address in ("127.0.0.1", "203.0.113.7", "203.0.113.9", "198.51.100.2", "198.51.100.3"):
        throttle.reset(address)


@pytest.fixture(scope="session", autouse=True)
def _fresh_test_redis() -> None:
    # The test database is made anew for every run, so user ids start at 1 again: a rate-limit
    # counter an earlier run left in Redis (kept two minutes) would count against this run's users.
    flush_test_redis()


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
        wait_http(f"{stack.http_url}/healthz", process=web, log=web_log)
        wait_worker(env)
        return stack

    yield start
    for stack in started:
        stop_stack(stack)


@pytest.fixture(scope="session")
def live_stack(start_stack: Callable[..., LiveStack]) -> LiveStack:
    return start_stack(name="stack")


@pytest.fixture
def live_sim(sim: SimulatorServer, seeded_tx: None) -> Iterator[SimulatorServer]:
    """The simulator behind every agent. The critic approves unless a test scripts it
    otherwise: generated (random) verdicts would fail the gate at random."""
    point_agents_at(sim.base_url)
    sim.configure(agents={"critic": {"script": [CLEAN_CRITIC], "repeat_last": True}})
    yield sim
    wait_until_quiet(sim)


@pytest.fixture
async def close_thread_connections() -> Any:
    """Close the DB connection of the thread sync_to_async uses after the test: the next test
    does not inherit it (the PostgreSQL restart test would leave it dead). django_db_setup
    closes it once more before the test database is dropped."""
    yield
    await sync_to_async(connections.close_all)()


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
