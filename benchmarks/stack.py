"""The benchmark's own stack: its database, its Redis databases, and the app's real processes.

Nothing here imports Django models, so it can run before `django.setup()`. Every process is
started through `Processes`, which stops them all (SIGTERM, then SIGKILL) when it is closed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self, cast
from urllib.parse import urlparse, urlunparse

import httpx
import psycopg
import redis
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
LOG_ROOT = ROOT / "test-output" / "bench"  # one folder per database, so two runs never share logs
HOST = "127.0.0.1"  # every process listens here only: the benchmark sends no traffic elsewhere


@dataclass(frozen=True)
class BenchEnv:
    """Where the benchmark's stack keeps its state: never the app's or the test suite's."""

    database_url: str
    redis_url: str
    redis_db_base: int
    turn_deadline_s: float
    # Prometheus metrics on (as deployed) or off: `--no-metrics` measures what collecting costs.
    metrics: bool = True

    @property
    def database_name(self) -> str:
        return urlparse(self.database_url).path.lstrip("/")

    @property
    def metrics_dir(self) -> Path:
        return LOG_ROOT / self.database_name / "metrics"

    def maintenance_url(self) -> str:
        """The same server and user, on the `postgres` database (to create ours, read stats)."""
        return urlunparse(urlparse(self.database_url)._replace(path="/postgres"))

    def variables(self, **overrides: str) -> dict[str, str]:
        """The environment every process of the stack (and this one) runs with."""
        values = {
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
            "REDIS_DB_BASE": str(self.redis_db_base),
            "DJANGO_SETTINGS_MODULE": "coaching_site.settings",
            "DJANGO_STATIC_MANIFEST": "0",
            "COACHING_TURN_DEADLINE_S": f"{self.turn_deadline_s:g}",
            # The benchmark's coachees send faster than a person: per-user limits must not shape it.
            "COACHING_TURNS_PER_MINUTE": "1000",
            "COACHING_MAX_SOCKETS_PER_USER": "100",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
            "COACHING_METRICS": "1" if self.metrics else "0",
        }
        if self.metrics:  # every process of the stack writes its samples here, as `make run` sets it up
            values["PROMETHEUS_MULTIPROC_DIR"] = str(self.metrics_dir)
        values.update(overrides)
        return values

    def process_env(self, **overrides: str) -> dict[str, str]:
        inherited = dict(os.environ)
        # prometheus_client writes its files wherever this names, even when it is empty (the
        # working directory): with metrics off it must not be set at all.
        inherited.pop("PROMETHEUS_MULTIPROC_DIR", None)
        return {**inherited, **self.variables(**overrides)}


def recreate_database(env: BenchEnv) -> None:
    """Drop and create the benchmark's database: it is the run's own, and one left by an older checkout
    can hold a schema its migration records no longer describe (an edited migration counts as applied)."""
    with psycopg.connect(env.maintenance_url(), autocommit=True) as conn:
        name = sql.Identifier(env.database_name)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))


def flush_redis(env: BenchEnv) -> None:
    """Empty the four logical databases the stack uses (broker, results, channel layer, cache)."""
    for offset in range(4):
        client = redis.Redis.from_url(f"{env.redis_url}/{env.redis_db_base + offset}")
        try:
            client.flushdb()
        finally:
            client.close()


def redis_clients_on(env: BenchEnv) -> int:
    """Connections of other programs to the stack's Redis databases (ours use db 0 for this)."""
    client = redis.Redis.from_url(f"{env.redis_url}/0")
    try:
        clients = cast(list[dict[str, Any]], client.client_list())  # sync client: a list
    finally:
        client.close()
    ours = range(env.redis_db_base, env.redis_db_base + 4)
    return sum(1 for c in clients if int(c.get("db", -1)) in ours)


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _lineage(pid: int) -> set[int]:
    """The process and its ancestors."""
    seen: set[int] = set()
    current: int | None = pid
    while current and current not in seen:
        seen.add(current)
        current = _parent(current)
    return seen


def foreign_processes(redis_db_base: int) -> list[str]:
    """Other programs set up for the same Redis databases (REDIS_DB_BASE in their environment),
    such as a test run started with that base: neither this process, its children, nor its parents."""
    me = os.getpid()
    ancestors = _lineage(me)
    marker = f"REDIS_DB_BASE={redis_db_base}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in ancestors:
            continue
        try:
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if me not in _lineage(int(entry.name)):
            found.append(f"pid {entry.name}: {command[:100]}")
    return found


REDIS_BUSY_EXIT = 3  # the exit status when the Redis databases are taken (the smoke test skips then)


def redis_busy(message: str) -> SystemExit:
    print(message, file=sys.stderr)
    return SystemExit(REDIS_BUSY_EXIT)


def pick_redis_db_base(redis_url: str, candidates: tuple[int, ...] = (4, 12)) -> int:
    """The first block of four Redis databases nobody uses now: no connections and no process set up
    for it. The app uses 0-3 and the tests 8-11 by default, so only 4-7 and 12-15 are candidates
    (`make test` gives 4-7 to its in-process run, which this finds by its environment)."""
    for base in candidates:
        if not redis_clients_on(BenchEnv("", redis_url, base, 0)) and not foreign_processes(base):
            return base
    raise redis_busy(f"no free block of Redis databases among bases {candidates}: pass --redis-db-base")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def wait_until(check: Callable[[], bool], *, timeout_s: float, what: str, alive: Callable[[], bool]) -> None:
    """Poll `check` until it holds; fail early when the process it waits for has died."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"{what} exited while starting")
        with suppress(Exception):
            if check():
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not come up within {timeout_s:.0f} s")


def http_ok(url: str) -> Callable[[], bool]:
    return lambda: httpx.get(url, timeout=1.0).status_code == 200


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        with suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return ""


@dataclass
class Processes:
    """The subprocesses of one benchmark run; `with Processes(logs) as procs:` stops them all."""

    log_dir: Path
    started: list[Proc] = field(default_factory=list)

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> Proc:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{name}.log"
        with log.open("wb") as out:
            # Our own interpreter and tools with fixed arguments: no untrusted input.
            popen = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        proc = Proc(name, popen, log)
        self.started.append(proc)
        return proc

    def stop(self, proc: Proc, timeout_s: float = 10.0) -> None:
        if proc.alive():
            with suppress(ProcessLookupError):
                proc.popen.send_signal(signal.SIGTERM)
            try:
                proc.popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait(timeout_s)
        if proc in self.started:
            self.started.remove(proc)

    def stop_all(self) -> None:
        for proc in reversed(list(self.started)):
            self.stop(proc)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop_all()


def start_simulator(procs: Processes, env: BenchEnv, *, ttft_ms: float, tokens_per_s: float) -> tuple[Proc, str]:
    """The simulated OpenAI-compatible server; returns it and its /v1 base URL."""
    port = free_port()
    argv = [
        sys.executable, "-m", "agents.llm.simulator", "--host", HOST, "--port", str(port),
        "--ttft-ms", f"{ttft_ms:g}", "--tokens-per-s", f"{tokens_per_s:g}",
    ]  # fmt: skip
    proc = procs.start("simulator", argv, env.process_env())
    root = f"http://{HOST}:{port}"
    wait_until(http_ok(root + "/health"), timeout_s=20, what="the simulator", alive=proc.alive)
    return proc, root + "/v1"


def worker_name() -> str:
    """The Celery node name of this run's worker (before the @host part)."""
    return f"bench-{os.getpid()}"


def start_worker(procs: Processes, env: BenchEnv, *, concurrency: int, log_level: str = "WARNING") -> Proc:
    """One Celery worker with a thread pool (agents wait on HTTP, not on the CPU)."""
    argv = [
        str(VENV_BIN / "celery"), "-A", "coaching_site", "worker", "-P", "threads", "-c", str(concurrency),
        "--without-gossip", "--without-mingle", "-l", log_level, "-n", f"{worker_name()}@%h",
    ]  # fmt: skip
    return procs.start("worker", argv, env.process_env())


def start_daphne(procs: Processes, env: BenchEnv, *, name: str = "daphne", **overrides: str) -> tuple[Proc, str]:
    """Daphne serving the app; returns it and its http:// root."""
    port = free_port()
    argv = [str(VENV_BIN / "daphne"), "-b", HOST, "-p", str(port), "coaching_site.asgi:application"]
    proc = procs.start(name, argv, env.process_env(**overrides))
    root = f"http://{HOST}:{port}"
    wait_until(http_ok(root + "/healthz"), timeout_s=60, what="Daphne", alive=proc.alive)
    return proc, root


def start_embedded_model(procs: Processes, env: BenchEnv) -> tuple[Proc, str]:
    """vLLM's CPU build serving SmolLM2-135M (the app's embedded default model), as make run starts
    it (scripts/bench.sh installs the engine and exports where it is). Its first start compiles
    for a few minutes; later starts reuse the compile cache."""
    port = free_port()
    argv = [sys.executable, "-m", "agents.llm.embedded", "serve", "--host", HOST, "--port", str(port)]
    proc = procs.start("embedded-model", argv, env.process_env())
    base = f"http://{HOST}:{port}/v1"
    wait_until(http_ok(base + "/models"), timeout_s=900, what="the embedded model server", alive=proc.alive)
    return proc, base
