"""benchmarks/compare.py: the app's CPU per turn and the threads figure, from two results files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.compare import app_cpu_ms_per_turn, render, threads_busy


def scenario(name: str, coachees: int, *, cpu: dict[str, float], turns: int, wall: float) -> dict[str, Any]:
    figures = {
        "wall_over_critical": {"p50": wall, "p95": wall + 0.1},
        "coach_first_token_app_ms": {"p50": 20.0, "p95": 40.0},
        "overhead_ms": {"p50": 100.0, "p95": 200.0},
    }
    return {
        "name": name,
        "title": f"{coachees} coachees",
        "coachees": coachees,
        "summary": {"turns": turns, "ok": turns, "figures": figures},
        "cpu": {"sampled_s": 60.0, "cores": 2, "groups": {k: {"mean_pct": v} for k, v in cpu.items()}},
    }


def results(commit: str, threads: float, cpu: dict[str, float]) -> dict[str, Any]:
    heavy = scenario("concurrent-50", 50, cpu=cpu, turns=300, wall=1.1)
    return {
        "meta": {"commit": commit},
        "scenarios": [scenario("serial", 1, cpu=cpu, turns=20, wall=1.02), heavy],
        "diagnosis": [f"at 50 coachees: Celery threads busy waiting on the model: about {threads} of 64 on average"],
    }


def test_app_cpu_counts_the_app_and_its_servers_not_the_simulator() -> None:
    s = scenario(
        "x",
        50,
        cpu={"daphne": 40, "celery": 40, "postgres": 15, "redis-server": 5, "simulator": 90},
        turns=300,
        wall=1.0,
    )
    # 100 % of one core for 60 s over 300 turns: 200 ms a turn; the simulator's 90 % is not the app's.
    assert app_cpu_ms_per_turn(s) == 200.0


def test_the_threads_figure_is_read_per_scenario() -> None:
    data = results("abc", 63.6, {"daphne": 10})
    assert threads_busy(data, data["scenarios"][1]) == 63.6
    assert threads_busy(data, data["scenarios"][0]) is None


def test_the_table_gives_ratios_and_budgets(tmp_path: Path) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps(results("aaa", 64.0, {"daphne": 50, "celery": 50})))
    after.write_text(json.dumps(results("bbb", 20.0, {"daphne": 25, "celery": 25})))
    table = render(before, after)
    assert "| 50 coachees: Celery threads busy (mean) | 64 | 20 | 0.31 | <= half |" in table
    assert "| 50 coachees: app CPU ms per turn | 200 | 100 | 0.50 | falls |" in table
    assert "| 1 coachees: wall / critical path p50 | 1.020 | 1.020 | 1.00 | <= 1.05 |" in table
