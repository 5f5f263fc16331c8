"""The engine trial: whole turns on the real engine, as issue 15's "Must show" asks.

`python -m benchmarks.engine_trial` (`make trial`) starts the app as a new user would
(scripts/run.sh: vLLM's CPU build serving SmolLM2-135M, the Celery worker and beat, Daphne) on
its own ports, database and Redis databases, and prints how long it took to be ready. Then:

1. turns in Chromium, one coachee, one after another: Coach's first token and the full answer,
   measured in the page from the Send click (p50/p95 against the targets);
2. conversations with known risks (benchmarks/data/risk_conversations.json) over the chat
   WebSocket, several coachees at once: every text a coachee saw is checked again with the
   quality gate and against the moves blocked for that coachee at that turn;
3. from the database: the gate's recorded findings, structured-output validity per agent,
   per-agent durations and the totals (degraded turns, fallbacks).

The report is printed and written to benchmarks/results/engine-trial-<UTC time>.{md,json}.
Every process it started is stopped at the end, also on Ctrl-C or an error.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import secrets
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.cpu import process_ticks, system_ticks
from benchmarks.report import machine_info, short_commit
from benchmarks.trial_app import (
    ROOT,
    TrialEnv,
    app_running,
    check_isolation,
    marked_processes,
    prepare_state,
    wait_http_ok,
    wait_ready,
)

DEFAULT_DATABASE_URL = "postgres://postgres@localhost:5432/coaching_trial"
# Ports and Redis databases of their own: beside `make run` (8000, 8081, Redis 0-3) and the
# test suite (Redis 8-11). `make bench` uses Redis 12-15 too: run one or the other.
DEFAULT_PORT, DEFAULT_LLM_PORT, DEFAULT_REDIS_DB_BASE = 8100, 8181, 12
# run.sh gives each turn 300 s on this engine; a full answer later than this is lost.
TURN_WAIT_S = 360.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engine_trial", description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="use the app already running here (with --database-url, --redis-db-base)")
    parser.add_argument("--browser-turns", type=int, default=10, help="turns in Chromium (default 10; 0: none)")
    parser.add_argument("--risk-turns", type=int, default=20, help="turns of risky conversations (default 20; 0: none)")
    parser.add_argument(
        "--conversations", default="", help="ids of the risky conversations to use, comma-separated (default: all)"
    )
    parser.add_argument(
        "--risk-concurrency", type=int, default=5, help="coachees with risks talking at once (default 5)"
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"the app's port (default {DEFAULT_PORT})")
    parser.add_argument(
        "--llm-port", type=int, default=DEFAULT_LLM_PORT, help=f"the model server's port (default {DEFAULT_LLM_PORT})"
    )
    parser.add_argument("--database-url", default=os.environ.get("TRIAL_DATABASE_URL", DEFAULT_DATABASE_URL))
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"))
    parser.add_argument("--redis-db-base", type=int, default=DEFAULT_REDIS_DB_BASE)
    parser.add_argument(
        "--keep-database",
        action="store_true",
        help="reuse the trial's database (default: dropped and made again, as on a new machine)",
    )
    parser.add_argument("--ready-timeout", type=float, default=1800.0, help="seconds for run.sh to be ready")
    parser.add_argument("--turn-wait", type=float, default=TURN_WAIT_S, help="seconds to wait for one full answer")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--report-only", type=Path, metavar="RESULTS_JSON", help="run nothing: print a stored report")
    return parser.parse_args(argv)


# --- How busy the machine was -----------------------------------------------------------------


@dataclass(frozen=True)
class CpuMark:
    busy: int
    total: int
    ours: int


def descendants(pid: int) -> list[int]:
    """This process's children, theirs, and so on (Chromium's processes)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def cpu_mark(marker: str | None) -> CpuMark:
    busy, total = system_ticks()
    pids = {os.getpid(), *descendants(os.getpid()), *(marked_processes(marker) if marker else [])}
    return CpuMark(busy, total, sum(process_ticks(pid) or 0 for pid in pids))


def cpu_share(start: CpuMark, end: CpuMark, *, app_counted: bool) -> dict[str, Any]:
    """Shares of all the machine's CPU time between two marks (100 % = every core busy)."""
    total = max(1, end.total - start.total)
    return {
        "machine_pct": 100.0 * (end.busy - start.busy) / total,
        "ours_pct": 100.0 * max(0, end.ours - start.ours) / total,
        "ours_what": "app, model server, browser and this harness" if app_counted else "browser and this harness",
    }


# --- The trial ----------------------------------------------------------------------------------


def setup_django(env: TrialEnv) -> None:
    """This process reads the trial's database (and logs coachees in) with the app's settings."""
    os.environ.update(env.variables())
    os.environ["DJANGO_SETTINGS_MODULE"] = "coaching_site.settings"
    import logging

    import django

    django.setup()
    logging.getLogger("axes").setLevel(logging.WARNING)  # a line per login otherwise


def browser_phase(http_url: str, stamp: str, count: int, wait_s: float, results: dict[str, Any]) -> list[Any]:
    from benchmarks import trial_turns

    locale, texts = trial_turns.load_browser_turns()
    texts = (texts * (count // len(texts) + 1))[:count]
    username, password = f"trial-{stamp}-browser", secrets.token_urlsafe(16)
    _, session_id = trial_turns.new_coachee(username, locale, password)
    print(f">> {count} turns in Chromium, one after another (coachee {username})", flush=True)
    records, errors = trial_turns.run_browser_turns(
        http_url, username=username, password=password, session_id=session_id, texts=texts, wait_s=wait_s
    )
    results["browser_errors"] = errors
    return records


def risk_phase(http_url: str, stamp: str, args: argparse.Namespace, results: dict[str, Any]) -> list[Any]:
    from benchmarks import trial_turns
    from benchmarks.load import Coachee

    conversations = trial_turns.load_conversations()
    if args.conversations:
        wanted = args.conversations.split(",")
        conversations = [c for c in conversations if c.id in wanted]
        if not conversations:
            raise ValueError(f"no conversation named {args.conversations} in {trial_turns.RISK_CONVERSATIONS.name}")
    plan = trial_turns.risk_plan(conversations, args.risk_turns)
    coachees = []
    for index, conversation in enumerate(plan):
        user_id, session_id = trial_turns.new_coachee(f"trial-{stamp}-{conversation.id}", conversation.locale)
        coachees.append((conversation, Coachee(index, session_id, trial_turns.session_cookie(user_id))))
    results["conversations"] = [asdict(c) for c in plan]
    results["risk_concurrency"] = min(args.risk_concurrency, len(plan))
    turns = sum(len(c.turns) for c in plan)
    at_once = results["risk_concurrency"]
    print(f">> {turns} turns of {len(plan)} conversations with known risks, {at_once} at once", flush=True)
    return asyncio.run(
        trial_turns.run_conversations(http_url, coachees, concurrency=args.risk_concurrency, wait_s=args.turn_wait)
    )


def run_turns(
    args: argparse.Namespace, env: TrialEnv, http_url: str, marker: str | None, results: dict[str, Any]
) -> list[Any]:
    """Both phases; a phase that fails is reported and the next one still runs."""
    setup_django(env)
    records: list[Any] = []
    phases = [
        (
            "browser",
            args.browser_turns,
            lambda: browser_phase(http_url, results["stamp"], args.browser_turns, args.turn_wait, results),
        ),
        (
            "risk",
            args.risk_turns,
            lambda: risk_phase(http_url, results["stamp"], args, results),
        ),
    ]
    for name, count, phase in phases:
        if count <= 0:
            continue
        start = cpu_mark(marker)
        try:
            records += phase()
        except Exception as exc:  # a phase's failure is part of the result, not the end of the trial
            traceback.print_exc()
            results["errors"].append(f"{name} turns: {type(exc).__name__}: {exc}")
        results["cpu"][name] = cpu_share(start, cpu_mark(marker), app_counted=marker is not None)
    return records


def analyse(records: list[Any], results: dict[str, Any]) -> None:
    from benchmarks import trial_checks, trial_report

    trial_checks.attach_turn_ids(records)
    turns = trial_checks.trial_turns(records)
    runs = trial_checks.trial_runs(turns)
    rows = trial_checks.turn_rows(records, turns, runs)
    checked = trial_checks.recheck(records, turns, runs)
    results["turns"] = rows
    results["browser"] = trial_report.latency_summary([r for r in rows if r["phase"] == "browser"])
    results["risk"] = trial_report.latency_summary([r for r in rows if r["phase"] == "risk"])
    results["shown"] = [asdict(c) for c in checked]
    results["gate_counts"] = trial_checks.gate_counts(turns)
    results["validity"] = trial_checks.validity(runs)
    results["durations"] = trial_checks.durations(runs)
    results["totals"] = trial_checks.totals(rows, checked)
    results["endpoints"] = trial_checks.endpoints()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report_only:
        from benchmarks import trial_report

        print(trial_report.render(json.loads(args.report_only.read_text())))
        return 0
    env = TrialEnv(args.port, args.llm_port, args.database_url, args.redis_url.rstrip("/"), args.redis_db_base)
    now = datetime.datetime.now(datetime.UTC)
    results: dict[str, Any] = {
        "stamp": now.strftime("%Y%m%d-%H%M%S"),
        "started_at": now.strftime("%Y-%m-%d %H:%M"),
        "commit": short_commit(),
        "machine": machine_info(),
        "args": {k: str(v) for k, v in vars(args).items()},
        "app": {},
        "cpu": {},
        "errors": [],
    }
    if args.url:
        http_url = args.url.rstrip("/")
        wait_http_ok(f"{http_url}/healthz", 60)
        results["app"] = {"url": http_url}
        records = run_turns(args, env, http_url, None, results)
    else:
        check_isolation(env)
        prepare_state(env, fresh_database=not args.keep_database)
        marker = f"trial-{results['stamp']}-{os.getpid()}"
        log_path = args.out_dir / f"engine-trial-{results['stamp']}-run.log"
        print(f">> starting the app: scripts/run.sh on port {env.port}, model server on {env.llm_port}", flush=True)
        with app_running(env, log_path, marker) as app:
            ready_s = wait_ready(app, args.ready_timeout)
            print(f">> ready {ready_s:.0f} s after scripts/run.sh started (model warm-up included)", flush=True)
            results["app"] = {
                "url": env.http_url,
                "ready_s": ready_s,
                "model_ready_s": app.model_ready_s,
                "log": str(log_path),
            }
            time.sleep(5)  # the machine settles after the warm-up before the first turn is timed
            records = run_turns(args, env, env.http_url, marker, results)
    from benchmarks import trial_report

    try:
        analyse(records, results)
    except Exception as exc:  # the turns' timings exist only here: keep them whatever happens
        traceback.print_exc()
        results["errors"].append(f"analysis: {type(exc).__name__}: {exc}")
        results["records"] = [asdict(r) for r in records]
        path = trial_report.write_json(args.out_dir, results)
        print(f">> the analysis failed; the turns as measured are in {os.path.relpath(path)}", flush=True)
        return 1

    markdown = trial_report.render(results)
    json_path, md_path = trial_report.write(args.out_dir, results, markdown)
    print("\n" + markdown)
    print(f">> written: {os.path.relpath(md_path)} and {os.path.relpath(json_path)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
