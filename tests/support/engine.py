"""The real model server of the real-model tests (tests/slow): vLLM's CPU build serving the
embedded default. Its start takes one to several minutes on two cores, much of it importing and
compiling on one core, so it begins as soon as pytest knows a real-model test is selected
(tests/conftest.py) and overlaps the tests that run first; the tests wait only for what is left."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass

from agents.llm import embedded
from tests.support.stack import OUTPUT_DIR, ROOT, free_port

# Set by `make test` (scripts/lib.sh ensure_engine).
ENGINE_HELP = "the real-model tests need the engine installed: run them through `make test`"
START_TIMEOUT_S = 900


@dataclass
class EngineServer:
    url: str
    proc: subprocess.Popen[bytes]

    def ready(self) -> str:
        """The server's address once it answers; its warm-up phase is printed meanwhile."""
        took = embedded.wait_ready(
            self.url,
            OUTPUT_DIR / "vllm.log",
            timeout_s=START_TIMEOUT_S,
            every_s=30,
            alive=lambda: self.proc.poll() is None,
        )
        print(f"vLLM ready after {took:.0f} s more")
        return self.url

    def stop(self) -> None:
        # Its own process group: vLLM's engine core and worker are children that must stop too.
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def installed() -> bool:
    return bool(os.environ.get("COACHING_ENGINE_PYTHON") and os.environ.get("COACHING_ENGINE_MODEL"))


def start() -> EngineServer:
    port = free_port()
    command = embedded.server_command(
        engine_python=os.environ["COACHING_ENGINE_PYTHON"],
        model_dir=os.environ["COACHING_ENGINE_MODEL"],
        port=port,
        cache_dir=os.environ["COACHING_CACHE_DIR"],
    )
    OUTPUT_DIR.mkdir(exist_ok=True)
    with (OUTPUT_DIR / "vllm.log").open("wb") as log:
        proc = subprocess.Popen(
            command.argv,
            env={**os.environ, **command.env},
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return EngineServer(f"http://127.0.0.1:{port}", proc)


_early: EngineServer | None = None


def start_early() -> None:
    """Start the server now, for a real-model test that will run later in this session."""
    global _early
    if _early is None and installed():
        _early = start()


def take() -> EngineServer:
    """The server started early, else one started now; whoever takes it stops it."""
    global _early
    server, _early = _early or start(), None
    return server


def stop_untaken() -> None:
    """At the session's end: a server started early whose tests never ran (stopped, deselected)."""
    global _early
    if _early is not None:
        _early.stop()
        _early = None
