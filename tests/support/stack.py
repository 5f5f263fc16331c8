"""The live stack: real Daphne and Celery worker processes on the test database and the test
Redis databases, and a WebSocket client for it."""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import redis
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from agents.llm.simulator.server import SimulatorServer
from agents.models import (
    CoachingSession,
)
from agents.turns.sessions import session_start
from tests.support.people import make_coachee

ROOT = Path(__file__).resolve().parents[2]


VENV_BIN = Path(sys.executable).parent


OUTPUT_DIR = ROOT / "test-output"


# Prometheus reads the live stack's /metrics with this (tests/test_metrics.py).
METRICS_TOKEN = "test-metrics-token-0123456789"


# Ports for the servers the tests start, below Linux's ephemeral range (32768-60999), from which
# every outgoing connection takes its local port: a port that bind(0) hands out is in that range,
# and any client socket of either pytest run may take it in the seconds before the server meant for
# it binds (a worker is started and pinged first). Here only a server that asked for it takes it.
SERVER_PORTS = range(20000, 32000)


def free_port() -> int:
    for _ in range(200):
        port = random.choice(SERVER_PORTS)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {SERVER_PORTS}")


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
        for proc, log in zip(self.processes, self.logs, strict=True):
            parts.append(f"--- py-spy dump of {log.stem} ({proc.pid})\n")
            parts.append(py_spy_dump(proc.pid))
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


# How long a process a test starts may take to serve: Daphne imports Django and warms the crisis
# pre-gate (about 6 s on an idle two-core machine), a worker imports the app. With the real-model
# tests running beside the ones that start processes (scripts/test.sh), three Daphnes in a row did
# not answer within 90 s on a slow CI machine, until the model server ran at a lower priority
# (embedded.NICENESS; then 7-17 s from Django's setup to listening, 2026-12-08, some during them);
# the wait ends as soon as the process answers, so a long bound costs nothing when healthy.
STARTUP_TIMEOUT_S = 90.0


def wait_http(
    url: str,
    timeout_s: float = STARTUP_TIMEOUT_S,
    process: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> None:
    """Until the server answers 200; a `process` that exits first fails at once. Either failure
    shows the end of its `log`: a server that never answered says why only there."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with suppress(OSError), urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 (local server)
            if response.status == 200:
                return
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{url}: the server exited ({process.returncode}) before it answered{log_tail(log)}")
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout_s} s{log_tail(log)}{startup_evidence(process, log)}")


def py_spy_dump(pid: int) -> str:
    """Every thread's Python stack in process `pid`, now."""
    dump = subprocess.run(
        [str(VENV_BIN / "py-spy"), "dump", "--pid", str(pid)], capture_output=True, text=True, check=False, timeout=30
    )
    return dump.stdout or dump.stderr


def startup_evidence(process: subprocess.Popen[bytes] | None, log: Path | None) -> str:
    """For a server that never answered: where it is stuck and what else kept the machine busy
    (CI once saw three Daphnes in a row silent for 90 s after Django's setup, with no trace of
    why). Also kept in test-output/<log>-stuck.txt."""
    parts = [f"\n--- load average: {Path('/proc/loadavg').read_text().strip()}"]
    if process is not None and process.poll() is None:
        parts.append(f"--- py-spy dump of the server ({process.pid})\n{py_spy_dump(process.pid)}")
    busiest = subprocess.run(
        ["ps", "-eo", "pid,ni,pcpu,rss,etime,args", "--sort=-pcpu", "--cols", "160"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    parts.append("--- the busiest processes\n" + "\n".join(busiest.stdout.splitlines()[:15]))
    text = "\n".join(parts)
    if log is not None:
        (OUTPUT_DIR / f"{log.stem}-stuck.txt").write_text(text)
    return text


def log_tail(log: Path | None, chars: int = 3000) -> str:
    if log is None or not log.exists():
        return ""
    return f"; the end of {log.name}:\n" + log.read_text(errors="replace")[-chars:]


def wait_worker(env: dict[str, str], timeout_s: float = STARTUP_TIMEOUT_S) -> None:
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


def wait_until_quiet(sim: SimulatorServer, timeout_s: float = 30) -> None:
    """Let work a test left behind (a stopped turn's agents, a canvas still running after the
    test saw what it waited for) finish before the tables are truncated under it: no model call
    in flight and no other database session in a statement or a transaction, three times in a
    row. (A worker between two model calls holds no call open, but a transaction of its own
    deadlocked against the TRUNCATE.)"""
    deadline = time.monotonic() + timeout_s
    quiet = 0
    with psycopg.connect(stack_env()["DATABASE_URL"], autocommit=True) as conn:
        while time.monotonic() < deadline and quiet < 3:
            in_flight = [c for c in sim.calls() if c.get("finished_at") is None]
            busy = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND state <> 'idle'"
            ).fetchone()
            quiet = 0 if in_flight or (busy and busy[0]) else quiet + 1
            time.sleep(0.2)


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


async def run_turn(stack: LiveStack, text: str = "I keep planning to run and never do.") -> tuple[Any, ChatClient]:
    user = await sync_to_async(make_coachee)()
    session = await sync_to_async(session_start)(user_id=user.pk)
    cookie = await sync_to_async(login_cookie)("coachee", "pw-for-tests-1")
    client = ChatClient(stack, session, cookie)
    await client.__aenter__()
    await client.send({"type": "user.message", "client_id": "c-1", "text": text})
    return session, client
