"""The performance benchmark: `python -m benchmarks.run` (`make bench` adds --real).

Starts the real stack on its own database and Redis databases (the simulated model server,
one Celery worker, Daphne), drives coachees over WebSockets at increasing load, computes every
figure per turn, prints one table and writes docs/bench/results-<date>-<commit>.{json,md}.
docs/bench/README.md says what each figure means. Every process it starts is stopped at the end.

Why ~580 lines in one module: it is the run's script, in the order it happens (arguments,
isolation checks, scenarios, per-turn figures, knee and diagnosis); the stack, the load, CPU
sampling, the report and the projection are modules of their own beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from benchmarks.load import MESSAGES
from benchmarks.stack import (
    LOG_ROOT,
    ROOT,
    BenchEnv,
    Processes,
    flush_redis,
    foreign_processes,
    pick_redis_db_base,
    recreate_database,
    redis_busy,
    redis_clients_on,
    worker_name,
)

DEFAULT_DATABASE_URL = "postgres://postgres@localhost:5432/coaching_bench"
CRITIC_APPROVES = {"violated_moves": [], "unsafe_content": [], "explanation": "ok"}
# Stability finds a minor risk, blocks nothing and does not escalate. Its random answers blocked
# moves or escalated on most turns, and a coachee with known risks gets Coach's reply held until
# it is checked (reply_gate.risks_known), not streamed: Coach's first token was then measured on
# one turn in twenty at one coachee, and the streaming path most coachees take hardly at all.
STABILITY_CALM = {
    "risks": [{"description": "Stress at work", "severity": 2, "detectability": 2, "reversibility": 1}],
    "blocked_moves": [],
    "escalation": "none",
    "rationale": "An ordinary week; nothing to block.",
}
REAL_DEADLINE_S = 600.0
# Decomposition figures compared against the 1-coachee run to say where overhead grows.
STAGE_FIGURES = (
    "ack_ms",
    "coach_call_start_ms",
    "shadow_call_start_ms",
    "gap_shadow_to_specialists_ms",
    "specialist_spread_ms",
    "gap_specialists_to_synth_ms",
    "gap_synth_to_critic_ms",
    "delivery_ms",
    "agent_pre_call_ms",
    "agent_post_call_ms",
)


@dataclass(frozen=True)
class ScenarioSpec:
    name: str
    title: str  # the table's column heading
    coachees: int
    turns: int  # per coachee
    interval_s: float  # between one coachee's sends; 0 = one after the other
    pause_s: float = 0.0  # after each turn.done before the next send (the coachee reads the answer)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny run for the harness's own test (seconds)")
    parser.add_argument("--json", type=Path, help="also write the results JSON to this path")
    parser.add_argument(
        "--report-only", type=Path, metavar="RESULTS_JSON", help="run nothing: analyse and print stored results again"
    )
    parser.add_argument("--out-dir", type=Path, help="where results files go (default docs/bench; none in --smoke)")
    parser.add_argument("--real", action=argparse.BooleanOptionalAction, default=False, help="one real-model turn")
    parser.add_argument(
        "--metrics",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Prometheus metrics on, as deployed (--no-metrics: what collecting them costs)",
    )
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_DATABASE_URL))
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379"))
    parser.add_argument(
        "--redis-db-base", default="12", help="first of four Redis databases; 'auto': 4 or 12, whichever is free"
    )
    parser.add_argument("--warmup-turns", type=int, default=2)
    parser.add_argument("--serial-turns", type=int, default=20, help="turns of the 1-coachee run")
    parser.add_argument(
        "--serial-pause-s",
        type=float,
        default=1.0,
        help="in the 1-coachee run, seconds from turn.done to the next message (a coachee reads the answer "
        "first; the next turn's context is read meanwhile); 0: back to back",
    )
    parser.add_argument("--concurrency", default="5,20,50", help="coachees of each concurrent run")
    parser.add_argument("--durations", default="60,180,60", help="seconds of each concurrent run")
    parser.add_argument("--interval-s", type=float, default=10.0, help="seconds between one coachee's messages")
    parser.add_argument("--ttft-ms", type=float, default=200.0)
    parser.add_argument("--tokens-per-s", type=float, default=100.0)
    parser.add_argument("--coach-tokens", type=int, default=60)
    # Each turn holds up to five threads at once (the trio and Synth wait for the stage before).
    parser.add_argument("--worker-concurrency", type=int, default=64)
    parser.add_argument(
        "--daphne-processes",
        type=int,
        default=1,
        help="web processes, the coachees dealt out to them in turn (a deployment runs one per core)",
    )
    parser.add_argument("--worker-log-level", default="WARNING", help="INFO logs each task's receipt (diagnosis)")
    parser.add_argument("--turn-deadline-s", type=float, default=60.0)
    parser.add_argument("--settle-s", type=float, default=11.0, help="quiet time before reading DB counters")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="record py-spy profiles (collapsed stacks) of Daphne and the Celery worker during each scenario "
        "(test-output/bench/profiles/)",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.real = False
        args.warmup_turns, args.serial_turns = 0, 2
        args.concurrency, args.durations, args.interval_s = "2", "3", 3.0
        args.ttft_ms, args.tokens_per_s, args.coach_tokens = 50.0, 400.0, 30
        args.worker_concurrency, args.settle_s = 8, 1.0
    return args


def build_scenarios(args: argparse.Namespace) -> tuple[ScenarioSpec | None, list[ScenarioSpec]]:
    """The warm-up (discarded) and the measured scenarios."""
    warmup = ScenarioSpec("warmup", "warm-up", 1, args.warmup_turns, 0.0) if args.warmup_turns > 0 else None
    pause = args.serial_pause_s
    serial_title = f"1 x{args.serial_turns} +{pause:g}s" if pause > 0 else f"1 x{args.serial_turns} b2b"
    measured = [ScenarioSpec("serial-1", serial_title, 1, args.serial_turns, 0.0, pause)]
    counts = [int(c) for c in str(args.concurrency).split(",") if c.strip()]
    durations = [float(d) for d in str(args.durations).split(",") if d.strip()]
    if len(durations) != len(counts):
        raise SystemExit("--durations needs one value per --concurrency value")
    for coachees, duration in zip(counts, durations, strict=True):
        turns = max(1, round(duration / args.interval_s))
        title = f"{coachees} @{args.interval_s:g}s x{duration:g}s"
        measured.append(ScenarioSpec(f"concurrent-{coachees}", title, coachees, turns, args.interval_s))
    return warmup, measured


def simulator_profile(args: argparse.Namespace) -> dict[str, Any]:
    """TTFT and rate for every agent; Coach writes free text, the others schema-valid JSON,
    the critic always approves so no turn regenerates by chance, and Stability never blocks or
    escalates, so Coach's reply streams."""
    return {
        "default": {"ttft_ms": args.ttft_ms, "tokens_per_s": args.tokens_per_s},
        "agents": {
            "coach": {"output_tokens": args.coach_tokens},
            "critic": {"script": [CRITIC_APPROVES], "repeat_last": True},
            "stability": {"script": [STABILITY_CALM], "repeat_last": True},
        },
    }


class Bench:
    """One benchmark run: the stack, its counters, and the scenarios run on it."""

    def __init__(self, args: argparse.Namespace, env: BenchEnv, procs: Processes) -> None:
        from agents.llm.simulator.control import SimulatorControl
        from benchmarks import app, stack
        from benchmarks.counters import DbCounters

        self.args, self.env, self.procs = args, env, procs
        self.profile = simulator_profile(args)
        self.sim_proc, self.sim_url = stack.start_simulator(
            procs, env, ttft_ms=args.ttft_ms, tokens_per_s=args.tokens_per_s
        )
        self.sim = SimulatorControl(self.sim_url, timeout_s=60)
        # Max concurrency above one, so the canvas runs beside Coach (not after it).
        app.point_agents_at("bench", kind="vllm", base_url=self.sim_url, model="sim-model", max_concurrency=64)
        self.worker = stack.start_worker(
            procs, env, concurrency=args.worker_concurrency, log_level=args.worker_log_level
        )
        webs = [stack.start_daphne(procs, env, name=f"daphne-{i}") for i in range(args.daphne_processes)]
        self.daphnes, self.http_roots = [proc for proc, _ in webs], [root for _, root in webs]
        wait_for_worker(self.worker.alive)
        self.db = DbCounters(env.database_url)

    def cpu_groups(self, pg_pids: Any) -> dict[str, Any]:
        from benchmarks.cpu import children_of, pids_named

        worker, daphnes, sim = self.worker.pid, [d.pid for d in self.daphnes], self.sim_proc.pid
        return {
            "daphne": lambda: daphnes,
            "celery": lambda: [worker, *children_of(worker)],
            "simulator": lambda: [sim],
            "redis-server": lambda: pids_named("redis-server"),
            "postgres": pg_pids,
            "bench-client": lambda: [os.getpid()],
        }

    def run_scenario(self, spec: ScenarioSpec) -> dict[str, Any]:
        from django.db import connections

        from benchmarks import app
        from benchmarks.counters import PostgresPids, db_per_turn, redis_per_turn, redis_snapshot
        from benchmarks.cpu import CpuSampler
        from benchmarks.load import run_load
        from benchmarks.metrics import summarize, turn_figures

        say(f"{spec.title}: {spec.coachees} coachee(s) x {spec.turns} turn(s)")
        self.sim.reset()  # clears the call log and the profile: set it again
        self.sim.configure(self.profile["default"], self.profile["agents"])
        coachees = app.make_coachees(spec.name, spec.coachees)
        # A closed connection reports its counters at once: none of this setup is counted below.
        connections.close_all()
        time.sleep(0.5)
        redis_url = f"{self.env.redis_url}/{self.env.redis_db_base}"
        db_before, redis_before = self.db.snapshot(), redis_snapshot(redis_url)
        pg_pids = PostgresPids(self.env.maintenance_url(), self.env.database_name)
        sampler = CpuSampler(self.cpu_groups(pg_pids), watch=lambda: foreign_processes(self.env.redis_db_base))
        sampler.start()
        profilers = self.start_profilers(spec) if self.args.profile else []
        try:
            load = asyncio.run(
                run_load(
                    self.http_roots,
                    coachees,
                    label=spec.name,
                    turns=spec.turns,
                    interval_s=spec.interval_s,
                    wait_s=self.args.turn_deadline_s + 10,
                    pause_s=spec.pause_s,
                )
            )
        finally:
            cpu = sampler.stop()
            pg_pids.close()
            for profiler in profilers:
                profiler.stop()
        time.sleep(self.args.settle_s)  # idle backends report their counters within 10 s
        db_after, redis_after = self.db.snapshot(), redis_snapshot(redis_url)

        calls_by_turn: dict[str, list[dict[str, Any]]] = {}
        for call in self.sim.calls():
            calls_by_turn.setdefault(str(call["turn"]), []).append(call)
        facts = app.turn_facts([t.turn_id for t in load.sent if t.turn_id is not None])
        socket_of = {s.coachee.index: s for s in load.sockets}
        turns = []
        for sent in load.sent:
            log = socket_of[sent.coachee].log
            events = [(at, e) for at, e in log if sent.turn_id is not None and e.get("turn_id") == sent.turn_id]
            calls = calls_by_turn.get(str(sent.turn_id), []) if sent.turn_id is not None else []
            turns.append(turn_figures(sent, events, calls, facts.get(sent.turn_id or -1)))
        summary = summarize(turns)
        foreign = foreign_workers() + cpu.pop("watched", [])
        if foreign:
            say(f"WARNING: another program used this run's Redis databases ({'; '.join(foreign)}): figures unreliable")
        return {
            "name": spec.name,
            "title": spec.title,
            "coachees": spec.coachees,
            "turns_per_coachee": spec.turns,
            "interval_s": spec.interval_s,
            "pause_s": spec.pause_s,
            "load_s": round(load.ended_at - load.started_at, 1),
            "socket_errors": [s.closed_error for s in load.sockets if s.closed_error],
            # Another program on the same Redis databases (its worker takes this run's tasks,
            # its test setup flushes them): seen by a broker ping and by /proc every second.
            "foreign_workers": foreign,
            "summary": summary,
            "cpu": cpu,
            "db": db_per_turn(db_before, db_after, len(load.sent)),
            "redis": redis_per_turn(redis_before, redis_after, len(load.sent)),
            "turns": turns,
        }

    def start_profilers(self, spec: ScenarioSpec) -> list[Any]:
        from benchmarks.profiling import PySpy

        out = LOG_ROOT / "profiles"
        return [
            *(PySpy.record(d.pid, out / f"{spec.name}-daphne-{i}.txt") for i, d in enumerate(self.daphnes)),
            PySpy.record(self.worker.pid, out / f"{spec.name}-celery.txt", subprocesses=True),
        ]

    def run_real_model_turn(self) -> dict[str, Any]:
        """One turn on vLLM's CPU build + SmolLM2, through a second Daphne whose turns may take 600 s."""
        from agents.llm import embedded
        from benchmarks import app, stack
        from benchmarks.load import run_load

        say("real model: one turn on vLLM (CPU) + SmolLM2-135M (one to several minutes on a CPU)")
        try:
            model_proc, base_url = stack.start_embedded_model(self.procs, self.env)
        except RuntimeError as exc:
            return {"error": f"the embedded model server did not start ({exc}); is requirements-llm.txt installed?"}
        app.point_agents_at(
            "embedded",
            kind="vllm",
            base_url=base_url,
            model=embedded.MODEL_ALIAS,
            max_concurrency=embedded.MAX_NUM_SEQS,
            read_timeout_s=300,
        )
        web, root = stack.start_daphne(
            self.procs, self.env, name="daphne-real", COACHING_TURN_DEADLINE_S=f"{REAL_DEADLINE_S:g}"
        )
        try:
            coachees = app.make_coachees("real", 1)
            load = asyncio.run(
                run_load(root, coachees, label="real", turns=1, interval_s=0.0, wait_s=REAL_DEADLINE_S + 10)
            )
        finally:
            self.procs.stop(web)
            self.procs.stop(model_proc)
        sent = load.sent[0]
        events = [(at, e) for at, e in load.sockets[0].log if e.get("turn_id") == sent.turn_id]
        done = next((e for _, e in events if e.get("type") == "turn.done"), None)
        first_delta = next((at for at, e in events if e.get("type") == "coach.delta"), None)
        turn_done_at = next((at for at, e in events if e.get("type") == "turn.done"), None)
        return {
            "turn_id": sent.turn_id,
            "outcome": "lost" if done is None else ("degraded" if done.get("degraded") else done.get("status")),
            "wall_s": None if turn_done_at is None else round(turn_done_at - sent.sent_at, 1),
            "coach_first_token_s": None if first_delta is None else round(first_delta - sent.sent_at, 2),
            "runs": app.turn_runs(sent.turn_id) if sent.turn_id is not None else [],
            "db": app.turn_summary(sent.turn_id) if sent.turn_id is not None else None,
        }


def wait_for_worker(alive: Any, timeout_s: float = 60.0) -> None:
    """The worker answers a ping through the broker once it consumes tasks."""
    from coaching_site.celery import app as celery_app

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError("the Celery worker exited while starting")
        if celery_app.control.ping(timeout=1.0):
            return
    raise RuntimeError(f"the Celery worker did not answer a ping within {timeout_s:.0f} s")


def foreign_workers() -> list[str]:
    """Celery workers answering on this run's broker other than its own."""
    from coaching_site.celery import app as celery_app

    replies = celery_app.control.ping(timeout=1.0) or []
    names = [name for reply in replies for name in reply]
    return sorted(n for n in names if not n.startswith(worker_name() + "@"))


def thread_seconds(turn: dict[str, Any]) -> float:
    """How long one turn holds worker threads: each task only its own step (the canvas queues
    the next stage when one ends: nothing is queued early to wait)."""
    shadow = turn["shadow_ms"] or 0
    specialists = [v or 0 for v in turn["specialists_ms"].values()] or [0]
    synth = (turn["synth_ms"] or 0) + (turn["critic_ms"] or 0)
    held = shadow + sum(specialists) + synth
    return held / 1000


def diagnose(scenarios: list[dict[str, Any]], knee: dict[str, Any], worker_threads: int) -> list[str]:
    """What limits throughput at the load knee and at the heaviest load: CPU, threads, delivery, stages."""
    if not scenarios:
        return []
    heaviest = max(scenarios, key=lambda s: s["coachees"])
    targets = [s for s in scenarios if s["name"] == knee.get("load_scenario")]
    targets += [heaviest] if heaviest not in targets else []
    lines: list[str] = []
    for target in targets:
        lines += diagnose_scenario(target, scenarios[0], worker_threads)
    return lines


def diagnose_scenario(target: dict[str, Any], baseline: dict[str, Any], worker_threads: int) -> list[str]:
    cpu, figures = target["cpu"], target["summary"]["figures"]
    capacity = 100 * cpu["cores"]
    busiest = sorted(cpu["groups"].items(), key=lambda kv: -kv[1]["mean_pct"])
    head = f"at {target['title']}:"
    lines = [
        f"{head} the machine's CPU was {cpu['machine']['mean_pct']:.0f}% of {capacity}% "
        f"(peak {cpu['machine']['peak_pct']:.0f}%); busiest: "
        + ", ".join(f"{name} {usage['mean_pct']:.0f}%" for name, usage in busiest[:4])
        + f"; other processes {cpu['other_mean_pct']:.0f}%"
    ]
    if cpu["machine"]["mean_pct"] >= 0.85 * capacity:
        lines.append(f"{head} the machine is CPU-bound: app, database, Redis, simulator and client share its cores")
    for name, usage in busiest:
        if usage["mean_pct"] >= 85:
            lines.append(f"{head} {name} used about one full core: one Python process (one GIL) is at its limit")
    # Little's law: threads busy on average = task throughput x the time each task holds a thread.
    per_turn_s = [thread_seconds(t) for t in target["turns"] if t["shadow_ms"] is not None]
    rate = target["summary"]["turns_per_s"]
    if per_turn_s and rate:
        busy = rate * sum(per_turn_s) / len(per_turn_s)
        lines.append(
            f"{head} Celery threads busy waiting on the model or an earlier stage: about {busy:.1f} of "
            f"{worker_threads} on average (turns/s x thread-seconds per turn)"
        )
    # Events Daphne sends itself (the ack) arriving long after the work that follows them (Coach's run
    # row) means they wait on the way out: channel layer -> Daphne's receive loop -> socket.
    ack, coach_row = figures["ack_ms"]["p50"], figures["coach_run_created_ms"]["p50"]
    if ack is not None and coach_row is not None and ack > 500 and ack > 3 * coach_row:
        lines.append(
            f"{head} outbound delivery backlog: message.accepted reaches the client {ack:.0f} ms after the send "
            f"(p50) although Coach's run row, written after it was sent, exists at {coach_row:.0f} ms; token relay "
            f"p50 {figures['relay_ms']['p50']:.0f} ms; {target['summary']['channel_messages_per_turn']:.0f} "
            "channel-layer messages per turn"
        )
    growth = []
    for key in STAGE_FIGURES:
        now, base = figures[key]["p95"], baseline["summary"]["figures"][key]["p95"]
        if now is not None and base is not None:
            growth.append((now - base, key))
    growth.sort(reverse=True)
    if growth and target is not baseline:
        lines.append(
            f"{head} p95 growth against 1 coachee: "
            + ", ".join(f"{key} {delta:+.0f} ms" for delta, key in growth[:3] if delta > 0)
        )
    return lines


def projection_for(scenarios: list[dict[str, Any]], real: dict[str, Any] | None) -> dict[str, Any]:
    """Tokens of the real-model turn where it has them (an agent may have failed there), else of the
    median simulated turn; overhead: the 1-coachee run's p50."""
    from benchmarks.metrics import RUN_FIELDS
    from benchmarks.metrics import SPECIALISTS as SPECIALIST_AGENTS
    from benchmarks.projection import median_tokens, projection, tokens_of_turn

    overhead_p50 = scenarios[0]["summary"]["figures"]["overhead_ms"]["p50"] or 0.0
    runs = [[dict(zip(RUN_FIELDS, r, strict=True)) for r in t["agent_runs"]] for s in scenarios for t in s["turns"]]
    tokens = median_tokens([r for r in runs if r])
    source = "the median simulated turn's AgentRun tokens (the simulator's word tokenizer)"
    if real and real.get("runs"):
        measured = {a: t for a, t in tokens_of_turn(real["runs"]).items() if t.prompt_tokens and t.completion_tokens}
        simulated = [a for a in ("shadow", *SPECIALIST_AGENTS, "synth", "critic") if a not in measured]
        tokens.update(measured)
        source = "the real-model turn's AgentRun tokens (SmolLM2's tokenizer)"
        if simulated:
            source += f"; for {', '.join(simulated)} (no tokens there) the median simulated turn's"
    return projection(tokens, overhead_p50 / 1000.0, source)


def say(message: str) -> None:
    print(f">> {message}", file=sys.stderr, flush=True)


def server_versions(env: BenchEnv) -> dict[str, str]:
    import psycopg
    import redis

    with psycopg.connect(env.maintenance_url()) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    client = redis.Redis.from_url(env.redis_url)
    try:
        redis_version = str(cast(dict[str, Any], client.info("server"))["redis_version"])
    finally:
        client.close()
    return {"postgresql": str(row[0]) if row else "?", "redis": redis_version}


def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    """Set up, run every scenario (and the real-model turn), and return the raw results."""
    redis_url = args.redis_url.rstrip("/")
    base = pick_redis_db_base(redis_url) if args.redis_db_base == "auto" else int(args.redis_db_base)
    env = BenchEnv(args.database_url, redis_url, base, args.turn_deadline_s, metrics=args.metrics)
    if env.metrics:  # a run starts with no samples of an earlier one
        shutil.rmtree(env.metrics_dir, ignore_errors=True)
        env.metrics_dir.mkdir(parents=True)
    os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    os.environ.update(env.variables())  # this process reads the same settings as the stack
    from benchmarks import report

    started = report.utc_now()
    warmup_spec, specs = build_scenarios(args)
    recreate_database(env)
    in_use, others = redis_clients_on(env), foreign_processes(env.redis_db_base)
    if in_use or others:
        # Flushing would break that program, and its worker would take this run's tasks.
        raise redis_busy(
            f"Redis databases {env.redis_db_base}-{env.redis_db_base + 3} are in use by another program "
            f"({in_use} connection(s); {'; '.join(others) or 'no process found'}): wait for it, "
            "or pick free ones with --redis-db-base"
        )
    flush_redis(env)

    import django

    django.setup()
    from benchmarks import app
    from benchmarks.metrics import RUN_FIELDS, summarize

    app.migrate()
    if crisis := app.messages_read_as_crisis(MESSAGES):
        raise SystemExit(
            f"the crisis pre-gate answers {len(crisis)} of the benchmark's messages with the card "
            f"({'; '.join(repr(t) for t in crisis)}): every later turn of those coachees would be held "
            "for checking and Coach's first token not measured; replace them in benchmarks/load.py "
            "(and record the false card in docs/crisis-safety.md if they are ordinary)"
        )
    with Processes(LOG_ROOT / env.database_name) as procs:
        try:
            bench = Bench(args, env, procs)
            warmup = bench.run_scenario(warmup_spec) if warmup_spec else None
            scenarios = [bench.run_scenario(spec) for spec in specs]
            real = bench.run_real_model_turn() if args.real else None
        except Exception:
            for proc in procs.started:
                say(f"log tail of {proc.name}:\n{proc.log_tail()}")
            raise
        finally:
            flush_redis(env)
    return {
        "meta": {
            "date": started.strftime("%Y-%m-%d"),
            "started_at": started.strftime("%Y-%m-%dT%H:%M:%S"),
            "commit": report.short_commit(),
            "machine": report.machine_info(),
            "servers": server_versions(env),
            "database": env.database_name,
            "redis_db_base": env.redis_db_base,
            "turn_deadline_s": env.turn_deadline_s,
            "worker_concurrency": args.worker_concurrency,
            "metrics": env.metrics,
            "db_counter_source": scenarios[0]["db"]["source"],
            "agent_run_fields": list(RUN_FIELDS),
            "profile": simulator_profile(args),
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        },
        "warmup": None if warmup is None else {"summary": summarize(warmup["turns"])},
        "scenarios": scenarios,
        "real_model": real,
    }


def analyse(results: dict[str, Any]) -> dict[str, Any]:
    """The conclusions drawn from the raw results: knee, diagnosis, projection."""
    from benchmarks import report
    from benchmarks.metrics import find_knee

    scenarios = results["scenarios"]
    knee = find_knee(scenarios)
    return {
        **results,
        "knee": knee,
        "knee_text": report.knee_text(knee),
        "diagnosis": diagnose(scenarios, knee, int(results["meta"]["worker_concurrency"])),
        "projection": projection_for(scenarios, results.get("real_model")),
    }


def publish(results: dict[str, Any], args: argparse.Namespace) -> None:
    """Print the table and the conclusions; write the results files."""
    from benchmarks import report

    scenarios, real, meta = results["scenarios"], results.get("real_model"), results["meta"]
    header, rows = report.table_rows(scenarios)
    text_table, md_table = report.render_text(header, rows), report.render_markdown(header, rows)
    machine, profile = meta["machine"], meta["profile"]["default"]
    print(
        f"\nBenchmark {meta['started_at']} UTC, commit {meta['commit']}, {machine['nproc']} x {machine['cpu_model']}, "
        f"{machine['memory_gib']} GiB, Python {machine['python']}; simulator TTFT {profile['ttft_ms']:g} ms, "
        f"{profile['tokens_per_s']:g} tokens/s; DB counters from {meta['db_counter_source']}\n"
    )
    print(text_table)
    print()
    print(results["knee_text"])
    for line in results["diagnosis"]:
        print(f"  - {line}")
    disturbed = [s["title"] for s in scenarios if s.get("foreign_workers")]
    if disturbed:
        print(f"  WARNING: another program used this run's Redis databases during {', '.join(disturbed)}")
    if real is not None:
        print()
        print(report.real_model_text(real))
    print()
    print(report.projection_text(results["projection"]))

    out_dir = args.out_dir or (None if args.smoke else ROOT / "docs" / "bench")
    if out_dir is not None:
        json_path, md_path = report.write_results(out_dir, results, text_table, md_table)
        shown = json_path.relative_to(ROOT) if json_path.is_relative_to(ROOT) else json_path
        print(f"\nwrote {shown} and {md_path.name}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, separators=(",", ":"), default=str) + "\n")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report_only is not None:
        # Conclusions drawn again from stored raw results (after a change to the analysis).
        raw = json.loads(args.report_only.read_text())
        raw["meta"]["reanalysed_at"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")
        publish(analyse(raw), args)
        return 0
    publish(analyse(run_benchmark(args)), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
