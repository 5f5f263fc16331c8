"""The benchmark harness at tiny scale: it starts its own stack (simulator, Celery worker, Daphne)
on its own database and Redis databases, drives a few turns and reports every figure.

It runs `python -m benchmarks.run --smoke` as a subprocess, so nothing collides with the suite's
own stack: database `coaching_bench_smoke` (created by the harness if missing) and a free block of
Redis databases (`--redis-db-base auto`: 4-7 or 12-15; the app uses 0-3, the tests 8-11). No timing
is asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from benchmarks.metrics import FIGURES, POOLED
from benchmarks.stack import REDIS_BUSY_EXIT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
# Figures every finished turn has; the rest (e.g. the gaps between stages) need the matching stages to run.
CORE_FIGURES = (
    "coach_first_token_app_ms",
    "wall_ms",
    "critical_path_ms",
    "overhead_ms",
    "wall_over_critical",
    "specialist_spread_ms",
    "parallel_efficiency",
)


def smoke_database_url() -> str:
    db = settings.DATABASES["default"]
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    return f"postgres://{db['USER']}{password}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}/coaching_bench_smoke"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench") / "results.json"
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "REDIS_DB_BASE")}
    command = [
        sys.executable, "-m", "benchmarks.run", "--smoke", "--json", str(out),
        "--database-url", smoke_database_url(), "--redis-db-base", "auto",
    ]  # fmt: skip
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=200, check=False)
    if proc.returncode == REDIS_BUSY_EXIT:
        pytest.skip(f"no free Redis databases for the benchmark's stack: {proc.stderr.strip()}")
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    assert "orchestration overhead" in proc.stdout  # the printed table
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def test_every_turn_finished_once(results: dict[str, Any]) -> None:
    scenarios = results["scenarios"]
    assert [s["coachees"] for s in scenarios] == [1, 2]
    for scenario in scenarios:
        summary = scenario["summary"]
        assert summary["turns"] == len(scenario["turns"]) > 0
        assert summary["ok"] + summary["failed"] + summary["lost"] == summary["turns"]
        assert summary["lost"] == 0
        assert summary["duplicated"] == 0
        assert summary["crisis_cards"] == 0


def test_every_figure_is_reported(results: dict[str, Any]) -> None:
    for scenario in results["scenarios"]:
        figures = scenario["summary"]["figures"]
        assert set(figures) == {key for key, _ in FIGURES}
        # Coach streamed on every turn (none held for checking), so its first token was measured.
        assert figures["coach_first_token_app_ms"]["n"] == scenario["summary"]["turns"]
        for key in CORE_FIGURES:
            assert figures[key]["n"] > 0, key
            assert figures[key]["p50"] is not None
            assert figures[key]["p95"] is not None
        assert figures["relay_ms"]["n"] > 0
        for turn in scenario["turns"]:
            assert turn["model_calls"] >= 7  # coach, shadow, three specialists, synth, critic
            for key in POOLED:
                assert isinstance(turn[key], list)
        summary = scenario["summary"]
        assert summary["turns_per_s"] is not None
        assert summary["persisted_events_per_turn"] > 0
        assert summary["coach_delta_frames_per_turn"] > 0
        assert summary["channel_messages_per_turn"] > 0
        assert scenario["db"]["source"] in ("pg_stat_statements", "pg_stat_database")
        assert "transactions_per_turn" in scenario["db"]
        assert "connections_opened_per_turn" in scenario["redis"]


def test_cpu_of_each_process_is_sampled(results: dict[str, Any]) -> None:
    for scenario in results["scenarios"]:
        cpu = scenario["cpu"]
        assert {"daphne", "celery", "simulator", "redis-server", "postgres", "bench-client"} <= set(cpu["groups"])
        assert cpu["sampled_s"] > 0
        assert cpu["machine"]["mean_pct"] >= 0


def test_summary_knee_projection_and_machine(results: dict[str, Any]) -> None:
    assert "coachees" in results["knee"]
    assert results["knee_text"].startswith("knee:")
    assert results["real_model"] is None  # --smoke never runs the real model
    projection = results["projection"]
    assert projection["label"].startswith("PROJECTION")
    assert len(projection["results"]) == 2
    for result in projection["results"]:
        assert result["turn_s"] > 0, result
    meta = results["meta"]
    assert meta["machine"]["nproc"] >= 1
    assert meta["machine"]["python"]
    assert meta["commit"]
    assert meta["database"] == "coaching_bench_smoke"
