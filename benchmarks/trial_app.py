"""The app for the engine trial, started the way a new user starts it: scripts/run.sh (what
`make run` runs), on the trial's own ports, database and Redis databases.

Nothing here imports Django, so it runs before `django.setup()`. Every process run.sh starts
carries a marker in its environment (vLLM's server too, though run.sh gives it a session of its
own), so stopping the app can find and end exactly these processes and no others.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

from benchmarks.stack import BenchEnv, flush_redis, foreign_processes, recreate_database, redis_busy, redis_clients_on

ROOT = Path(__file__).resolve().parent.parent
RUN_SH = ROOT / "scripts" / "run.sh"
MARKER = "COACHING_ENGINE_TRIAL"
# What run.sh must not inherit from the caller's shell: each would point it elsewhere.
NOT_INHERITED = (
    "COACHING_LLM_BASE_URL",
    "PROMETHEUS_MULTIPROC_DIR",
    "DJANGO_SETTINGS_MODULE",
    "COACHING_TURN_DEADLINE_S",
)
# seed_demo prints the demo password; logs and results never keep it.
PASSWORD_SHOWN = re.compile(r"((?:log in as|or)\s+\w+ / )\S+")
COLOURS = re.compile(r"\x1b\[[0-9;]*m")
READY_LINE = "Chat:"  # seed_demo's line, printed once the model server has answered /health
MODEL_READY = re.compile(r"model server ready (\d+) s after it was started")


@dataclass(frozen=True)
class TrialEnv:
    """Where the trial's app lives: never the developer's app (8000/8081, database `coaching`,
    Redis 0-3) nor the test suite's (Redis 8-11)."""

    port: int
    llm_port: int
    database_url: str
    redis_url: str
    redis_db_base: int

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def variables(self) -> dict[str, str]:
        """What this process and run.sh's processes read their settings from."""
        return {
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
            "REDIS_DB_BASE": str(self.redis_db_base),
            "PORT": str(self.port),
            "LLM_PORT": str(self.llm_port),
        }

    def bench_env(self) -> BenchEnv:
        # The benchmark's helpers for the database and Redis take their settings this way.
        return BenchEnv(self.database_url, self.redis_url, self.redis_db_base, turn_deadline_s=0)


@dataclass
class RunningApp:
    popen: subprocess.Popen[bytes]
    log_path: Path
    marker: str
    started_at: float = field(default_factory=time.monotonic)
    ready_after_s: float | None = None
    model_ready_s: int | None = None  # run.sh's own figure for the model server's warm-up
    ready: threading.Event = field(default_factory=threading.Event)
    tail: list[str] = field(default_factory=list)


def port_taken(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def check_isolation(env: TrialEnv) -> None:
    """Refuse to start where another program would be disturbed: something on our ports, or
    another program on our Redis databases (we flush them, and its worker would take our tasks)."""
    taken = [port for port in (env.port, env.llm_port) if port_taken(port)]
    if taken:
        raise SystemExit(f"port(s) {taken} already in use: stop what listens there or pass --port/--llm-port")
    others = redis_clients_on(env.bench_env())
    processes = foreign_processes(env.redis_db_base)
    if others or processes:
        detail = "; ".join(processes[:3]) or f"{others} connection(s)"
        raise redis_busy(
            f"Redis databases {env.redis_db_base}-{env.redis_db_base + 3} are in use ({detail}): "
            "pass --redis-db-base with a free block of four"
        )


def prepare_state(env: TrialEnv, *, fresh_database: bool) -> None:
    """Empty Redis databases, and (as on a new machine) an empty database for run.sh to migrate."""
    flush_redis(env.bench_env())
    if fresh_database:
        recreate_database(env.bench_env())


def start_app(env: TrialEnv, log_path: Path, marker: str) -> RunningApp:
    """scripts/run.sh in a process group of its own; its output goes to `log_path` and, a line
    at a time, to stderr (its warm-up phases are what a new user watches)."""
    environment = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    environment.update(env.variables())
    environment[MARKER] = marker
    log_path.parent.mkdir(parents=True, exist_ok=True)
    popen = subprocess.Popen(
        [str(RUN_SH)],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    app = RunningApp(popen=popen, log_path=log_path, marker=marker)
    assert popen.stdout is not None
    threading.Thread(target=_follow_output, args=(app, popen.stdout), daemon=True).start()
    return app


def _follow_output(app: RunningApp, stream: IO[bytes]) -> None:
    with app.log_path.open("w") as log:
        for raw in stream:
            line = COLOURS.sub("", raw.decode(errors="replace").rstrip())
            line = PASSWORD_SHOWN.sub(r"\1<password>", line)
            log.write(line + "\n")
            log.flush()
            print(f"  [run.sh] {line}", file=sys.stderr, flush=True)
            app.tail = [*app.tail[-40:], line]
            if (found := MODEL_READY.search(line)) is not None:
                app.model_ready_s = int(found.group(1))
            if READY_LINE in line and not app.ready.is_set():
                app.ready_after_s = time.monotonic() - app.started_at
                app.ready.set()


def wait_ready(app: RunningApp, timeout_s: float) -> float:
    """Seconds from starting run.sh until it printed where to log in (the model warmed up)."""
    deadline = time.monotonic() + timeout_s
    while not app.ready.wait(1.0):
        if app.popen.poll() is not None:
            raise RuntimeError("scripts/run.sh exited before the app was ready:\n" + "\n".join(app.tail[-20:]))
        if time.monotonic() > deadline:
            raise RuntimeError(f"the app was not ready within {timeout_s:.0f} s; see {app.log_path}")
    assert app.ready_after_s is not None
    return app.ready_after_s


def wait_http_ok(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        time.sleep(1.0)
    raise RuntimeError(f"{url} did not answer within {timeout_s:.0f} s")


def marked_processes(marker: str) -> list[int]:
    """Processes started for this trial: those whose environment carries our marker."""
    wanted = f"{MARKER}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with suppress(OSError):
                if wanted in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def stop_app(app: RunningApp) -> None:
    """Stop run.sh as Ctrl-C does (its trap stops the model server's group, the worker, beat
    and Daphne), then end whatever of ours is left: its group, then each marked process."""
    pgid = app.popen.pid  # start_new_session: run.sh leads its own group
    if app.popen.poll() is None:
        with suppress(ProcessLookupError):
            os.kill(app.popen.pid, signal.SIGTERM)
        try:
            app.popen.wait(30)
        except subprocess.TimeoutExpired:
            # run.sh runs its trap only between commands: a long one in the foreground (the
            # model's warm-up wait) must be ended first.
            with suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                app.popen.wait(30)
    with suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = marked_processes(app.marker)
        for pid in left:
            with suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 15
        while left and time.monotonic() < deadline:
            time.sleep(0.5)
            left = marked_processes(app.marker)
        if not left:
            break
    with suppress(subprocess.TimeoutExpired):
        app.popen.wait(5)


@contextmanager
def app_running(env: TrialEnv, log_path: Path, marker: str) -> Iterator[RunningApp]:
    app = start_app(env, log_path, marker)
    try:
        yield app
    finally:
        print(">> stopping the app (scripts/run.sh and everything it started)", file=sys.stderr, flush=True)
        stop_app(app)
