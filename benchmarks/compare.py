"""Two benchmark results side by side, as ratios, against the redesign's budgets.

    python -m benchmarks.compare docs/bench/results-<before>.json docs/bench/results-<after>.json

Both runs should come from one sitting on the same idle machine (see docs/bench/README.md). The
app's CPU per turn is Daphne + the Celery worker + PostgreSQL + Redis (the simulator and the
benchmark's own client excluded), from each scenario's mean CPU over its sampled time.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

APP_PROCESSES = ("daphne", "celery", "postgres", "redis-server")


def app_cpu_ms_per_turn(scenario: dict[str, Any]) -> float | None:
    cpu, turns = scenario["cpu"], scenario["summary"]["turns"]
    if not turns or not cpu.get("sampled_s"):
        return None
    percent = sum(cpu["groups"].get(name, {}).get("mean_pct", 0.0) for name in APP_PROCESSES)
    return percent / 100 * cpu["sampled_s"] * 1000 / turns


def threads_busy(results: dict[str, Any], scenario: dict[str, Any]) -> float | None:
    """Celery threads a scenario kept busy on average, as that run's own harness computed them
    (the formula follows the design it measured: with stage handoffs a turn held threads while
    it waited on the stage before)."""
    for line in results.get("diagnosis", []):
        if line.startswith(f"at {scenario['title']}:") and "Celery threads busy" in line:
            match = re.search(r"about ([0-9.]+) of (\d+)", line)
            if match:
                return float(match.group(1))
    return None


def figure(scenario: dict[str, Any], key: str, stat: str) -> float | None:
    value = scenario["summary"]["figures"].get(key, {}).get(stat)
    return None if value is None else float(value)


def rows(before: dict[str, Any], after: dict[str, Any]) -> list[tuple[str, float | None, float | None, str]]:
    """(figure, before, after, budget) for every scenario both runs have."""
    out: list[tuple[str, float | None, float | None, str]] = []
    by_name = {s["name"]: s for s in before["scenarios"]}
    for now in after["scenarios"]:
        then = by_name.get(now["name"])
        if then is None:
            continue
        title, single = now["title"], now["coachees"] == 1
        heaviest = now["coachees"] == max(s["coachees"] for s in after["scenarios"])
        out += [
            (
                f"{title}: wall / critical path p50",
                figure(then, "wall_over_critical", "p50"),
                figure(now, "wall_over_critical", "p50"),
                "<= 1.05" if single else "",
            ),
            (
                f"{title}: wall / critical path p95",
                figure(then, "wall_over_critical", "p95"),
                figure(now, "wall_over_critical", "p95"),
                "<= 1.3" if heaviest else "",
            ),
            (
                f"{title}: Coach first token, app-added ms p50",
                figure(then, "coach_first_token_app_ms", "p50"),
                figure(now, "coach_first_token_app_ms", "p50"),
                "<= 60",
            ),
            (
                f"{title}: orchestration overhead ms p50",
                figure(then, "overhead_ms", "p50"),
                figure(now, "overhead_ms", "p50"),
                "",
            ),
            (f"{title}: app CPU ms per turn", app_cpu_ms_per_turn(then), app_cpu_ms_per_turn(now), "falls"),
            (
                f"{title}: Celery threads busy (mean)",
                threads_busy(before, then),
                threads_busy(after, now),
                "<= half" if heaviest else "",
            ),
            (f"{title}: turns answered", then["summary"]["ok"], now["summary"]["ok"], ""),
        ]
    return out


def render(before_path: Path, after_path: Path) -> str:
    before, after = (json.loads(p.read_text()) for p in (before_path, after_path))
    lines = [
        f"before: {before_path.name} ({before['meta'].get('commit', '?')}), "
        f"after: {after_path.name} ({after['meta'].get('commit', '?')})",
        "",
        "| figure | before | after | after / before | budget |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, then, now, budget in rows(before, after):
        ratio = f"{now / then:.2f}" if then and now is not None else ""
        lines.append(f"| {name} | {_fmt(then)} | {_fmt(now)} | {ratio} | {budget} |")
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    print(render(args.before, args.after))


if __name__ == "__main__":
    main()
