"""Running the simulator on uvicorn, outside the foreground ``python -m agents.llm.simulator``.

* ``SimulatorServer(port=0, ttft_ms=10).start()`` runs it in a background thread.
* ``start_simulator_process()`` runs it as a subprocess; ``SimulatorControl`` steers it over HTTP.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
import uvicorn
from starlette.applications import Starlette

from agents.llm.simulator.app import create_app
from agents.llm.simulator.state import SimulatorState

_PROJECT_ROOT = Path(__file__).resolve().parents[3]


class _DropNoiseFilter(logging.Filter):
    """The "drop" fault ends a response early on purpose; uvicorn logs that as an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "returned without completing response" not in record.getMessage()


def uvicorn_config(app: Starlette, host: str, port: int, log_level: str, **extra: Any) -> uvicorn.Config:
    error_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _DropNoiseFilter) for f in error_log.filters):
        error_log.addFilter(_DropNoiseFilter())
    # h11 everywhere; a short graceful shutdown so hung streams cannot block stop().
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        http="h11",
        lifespan="off",
        timeout_graceful_shutdown=1,
        **extra,
    )


class SimulatorServer:
    """The simulator on a background thread: ``with SimulatorServer(port=0) as sim: sim.base_url``."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        model: str = "sim-model",
        seed: int = 0,
        log_level: str = "warning",
        **default_profile: Any,
    ) -> None:
        self.host, self.port = host, port
        self.state = SimulatorState(model=model, seed=seed, **default_profile)
        self.app = create_app(self.state)
        self._log_level = log_level
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"

    def start(self, timeout_s: float = 10.0) -> Self:
        if self._server is not None:
            return self
        # log_config=None: leave the host process's logging setup alone.
        config = uvicorn_config(self.app, self.host, self.port, self._log_level, log_config=None)
        server = self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=server.run, name="llm-simulator", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"simulator failed to start on {self.host}:{self.port}")
            time.sleep(0.01)
        self.port = server.servers[0].sockets[0].getsockname()[1]  # resolves port=0
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout_s)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self if self._server is not None else self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def configure(
        self, default: Mapping[str, Any] | None = None, agents: Mapping[str, Mapping[str, Any]] | None = None
    ) -> dict[str, Any]:
        return self.state.configure(default, agents)

    def reset(self) -> None:
        self.state.reset()

    def calls(self, agent: str | None = None, turn: str | int | None = None) -> list[dict[str, Any]]:
        return self.state.calls(agent, turn)

    def concurrency(self) -> dict[str, int]:
        return self.state.concurrency()


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def start_simulator_process(
    port: int = 0,
    *,
    host: str = "127.0.0.1",
    ttft_ms: float = 200.0,
    tokens_per_s: float = 100.0,
    output_tokens: int = 40,
    seed: int = 0,
    model: str = "sim-model",
    timeout_s: float = 15.0,
) -> tuple[subprocess.Popen[bytes], str]:
    """Run ``python -m agents.llm.simulator`` and wait until /health answers.

    ``port=0`` picks a free port (retrying if another process grabs it first).
    Returns the process and its ``/v1`` base URL; end it with ``stop_simulator_process``.
    """
    path = os.pathsep.join(filter(None, [str(_PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    for _attempt in range(1 if port else 3):
        chosen = port or _free_port(host)
        cmd = [
            sys.executable,
            "-m",
            "agents.llm.simulator",
            "--host",
            host,
            "--port",
            str(chosen),
            "--ttft-ms",
            str(ttft_ms),
            "--tokens-per-s",
            str(tokens_per_s),
            "--output-tokens",
            str(output_tokens),
            "--seed",
            str(seed),
            "--model",
            model,
        ]
        # Our own interpreter and module with numeric/str options: no untrusted input.
        proc = subprocess.Popen(cmd, cwd=_PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL)  # noqa: S603
        root, deadline = f"http://{host}:{chosen}", time.monotonic() + timeout_s
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(root + "/health", timeout=0.5).status_code == 200:
                    return proc, root + "/v1"
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        stop_simulator_process(proc)
    raise RuntimeError(f"simulator process did not become healthy on {host}:{port or 'a free port'}")


def stop_simulator_process(proc: subprocess.Popen[bytes], timeout_s: float = 5.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout_s)
