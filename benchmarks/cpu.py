"""CPU use of each process of the stack, read from /proc (no extra dependency).

A background thread reads utime + stime of every process of each group once per interval;
a group's CPU% is its ticks over the interval, where 100 % is one core fully busy.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PidSource = Callable[[], list[int]]


def process_ticks(pid: int) -> int | None:
    """utime + stime of a process (all its threads), in clock ticks; None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces or parentheses: the fields start after the last ')'.
    fields = stat.rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)


def system_ticks() -> tuple[int, int]:
    """(busy, total) ticks of all CPUs since boot, from the first line of /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # guest time is already counted in user
    return total - idle, total


def pids_named(name: str) -> list[int]:
    """Processes whose command name (/proc/PID/comm) is `name`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError):
                if (entry / "comm").read_text().strip() == name:
                    found.append(int(entry.name))
    return found


def children_of(pid: int) -> list[int]:
    """Direct children (the Celery thread pool has none, but a prefork pool would)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError, IndexError, ValueError):
                stat = (entry / "stat").read_text()
                if int(stat.rpartition(")")[2].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


@dataclass
class GroupUsage:
    ticks: int = 0
    peak_pct: float = 0.0


@dataclass
class CpuSampler:
    """Samples the groups' CPU from start() to stop(); summary() gives mean and peak per group."""

    groups: dict[str, PidSource]
    watch: Callable[[], list[str]] | None = None  # called every interval; what it returns is collected
    interval_s: float = 1.0
    _watched: set[str] = field(default_factory=set)
    _usage: dict[str, GroupUsage] = field(default_factory=dict)
    _system_busy: int = 0
    _system_total: int = 0
    _system_peak: float = 0.0
    _elapsed_s: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        return self.summary()

    def _read(self) -> dict[str, dict[int, int]]:
        snapshot: dict[str, dict[int, int]] = {}
        for name, source in self.groups.items():
            pids: list[int] = []
            with suppress(Exception):  # a source that fails (a closed DB connection) reads as empty
                pids = source()
            ticks = {pid: t for pid in pids if (t := process_ticks(pid)) is not None}
            snapshot[name] = ticks
        return snapshot

    def _run(self) -> None:
        previous = self._read()
        prev_busy, prev_total = system_ticks()
        prev_time = time.monotonic()
        while not self._stop.wait(self.interval_s):
            if self.watch is not None:
                with suppress(Exception):
                    self._watched.update(self.watch())
            current = self._read()
            busy, total = system_ticks()
            now = time.monotonic()
            span = now - prev_time
            for name, ticks in current.items():
                before = previous.get(name, {})
                # A process first seen now (a new database connection) counts from its start.
                delta = sum(t - before.get(pid, 0) for pid, t in ticks.items())
                usage = self._usage.setdefault(name, GroupUsage())
                usage.ticks += max(delta, 0)
                usage.peak_pct = max(usage.peak_pct, 100.0 * delta / CLOCK_TICKS / span)
            if total > prev_total:
                cores = os.cpu_count() or 1
                self._system_peak = max(self._system_peak, 100.0 * cores * (busy - prev_busy) / (total - prev_total))
            self._system_busy += busy - prev_busy
            self._system_total += total - prev_total
            self._elapsed_s += span
            previous, prev_busy, prev_total, prev_time = current, busy, total, now

    def summary(self) -> dict[str, Any]:
        """CPU% per group (100 = one core): mean over the sampled time and the busiest interval."""
        seconds = self._elapsed_s or 1.0
        cores = os.cpu_count() or 1
        groups = {
            name: {"mean_pct": round(100.0 * u.ticks / CLOCK_TICKS / seconds, 1), "peak_pct": round(u.peak_pct, 1)}
            for name, u in self._usage.items()
        }
        machine = 100.0 * cores * self._system_busy / self._system_total if self._system_total else 0.0
        accounted = sum(g["mean_pct"] for g in groups.values())
        return {
            "sampled_s": round(self._elapsed_s, 1),
            "cores": cores,
            "groups": groups,
            # Everything that ran on the machine, and what none of the groups above used
            # (other engineers' work, the kernel): both in % of one core.
            "machine": {"mean_pct": round(machine, 1), "peak_pct": round(self._system_peak, 1)},
            "other_mean_pct": round(max(machine - accounted, 0.0), 1),
            "watched": sorted(self._watched)[:10],
        }
