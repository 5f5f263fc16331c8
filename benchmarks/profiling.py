"""Profiles of the stack's processes while a scenario runs (`--profile`), with py-spy.

py-spy samples a running Python process from outside (ptrace), so the processes are measured
as they are, without a profiler inside them. Root, or ptrace permission, is needed.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SAMPLES_PER_S = 250


@dataclass
class PySpy:
    proc: subprocess.Popen[bytes] | None
    output: Path

    @classmethod
    def record(cls, pid: int, output: Path, *, subprocesses: bool = False) -> PySpy:
        """Start sampling `pid`: where its threads spend CPU (waits on the database, Redis or the
        model are not sampled; the benchmark's per-stage figures show those)."""
        exe = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
        if exe is None:
            print("py-spy is not installed (requirements-dev.txt): no profile", file=sys.stderr)
            return cls(None, output)
        output.parent.mkdir(parents=True, exist_ok=True)
        # Collapsed stacks: readable as text, and speedscope or flamegraph.pl draw them.
        # --gil: only the thread holding the GIL is sampled. Without it a thread waiting for the GIL
        # (most of them, on a busy process) is sampled where it waits, e.g. in a metrics lock.
        argv = [exe, "record", "--pid", str(pid), "--rate", str(SAMPLES_PER_S), "--format", "raw", "--gil"]
        argv += ["--output", str(output)]
        argv += ["--subprocesses"] if subprocesses else []
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return cls(proc, output)

    def stop(self) -> None:
        """Stop sampling; py-spy writes the flame graph when interrupted."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        print(f"profile: {self.output}", file=sys.stderr)
