"""What the benchmark prints and writes: one compact table, a JSON file with every raw figure,
and a short markdown file. Scenarios are columns, figures are rows (p50 / p95 per cell)."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from benchmarks.metrics import FIGURES
from benchmarks.stack import ROOT

CPU_GROUPS = ("daphne", "celery", "simulator", "redis-server", "postgres", "bench-client")


def web_processes(meta: dict[str, Any]) -> int:
    """How many Daphne processes served the run (one before the option existed)."""
    return int(meta.get("args", {}).get("daphne_processes", 1))


def machine_info() -> dict[str, Any]:
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem_kb = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def short_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _pair(figure: dict[str, Any]) -> str:
    return f"{_num(figure['p50'])} / {_num(figure['p95'])}"


def table_rows(scenarios: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the results table."""
    header = ["figure (p50 / p95)", *(s["title"] for s in scenarios)]
    rows: list[list[str]] = []

    def row(label: str, cell: Any) -> None:
        rows.append([label, *(cell(s) for s in scenarios)])

    row("turns ok/failed/lost/dup", lambda s: "{ok}/{failed}/{lost}/{duplicated}".format(**s["summary"]))
    row("turns per second", lambda s: _num(s["summary"]["turns_per_s"]))
    row("turns answered by the crisis card", lambda s: str(s["summary"].get("crisis_cards", "-")))
    for key, label in FIGURES:
        row(label, lambda s, key=key: _pair(s["summary"]["figures"][key]))
        if key == "coach_first_token_app_ms":
            row("  of turns (streamed replies)", lambda s, key=key: str(s["summary"]["figures"][key].get("n", "-")))
    row("model calls / turn", lambda s: _num(s["summary"]["model_calls_per_turn"]))
    row("persisted events / turn", lambda s: _num(s["summary"]["persisted_events_per_turn"]))
    row("coach.delta frames / turn", lambda s: _num(s["summary"]["coach_delta_frames_per_turn"]))
    row("channel-layer msgs / turn", lambda s: _num(s["summary"]["channel_messages_per_turn"]))
    row("DB transactions / turn", lambda s: _num(s["db"]["transactions_per_turn"]))
    if any("statements_per_turn" in s["db"] for s in scenarios):
        row("DB statements / turn", lambda s: _num(s["db"].get("statements_per_turn")))
    row("DB rows written / turn", lambda s: _num(s["db"]["rows_written_per_turn"]))
    row("DB table scans / turn", lambda s: _num(s["db"]["table_scans_per_turn"]))
    row("Redis connections / turn", lambda s: _num(s["redis"]["connections_opened_per_turn"]))
    row("Redis commands / turn", lambda s: _num(s["redis"]["commands_per_turn"]))
    for group in CPU_GROUPS:
        row(f"CPU% {group} (mean/peak)", lambda s, g=group: _cpu(s["cpu"]["groups"].get(g)))
    row("CPU% whole machine", lambda s: _cpu(s["cpu"]["machine"]))
    row("CPU% other processes", lambda s: _num(s["cpu"]["other_mean_pct"]))
    return header, rows


def _cpu(usage: dict[str, Any] | None) -> str:
    return "-" if usage is None else f"{usage['mean_pct']:.0f} / {usage['peak_pct']:.0f}"


def render_text(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in [header, *rows]]  # fmt: skip
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render_markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(["---"] + ["---:"] * (len(header) - 1)) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def knee_text(knee: dict[str, Any]) -> str:
    limit = f"{knee['threshold_ms']:.0f} ms"
    if knee["coachees"] is None:
        text = f"knee: none - p95 orchestration overhead stayed at or below {limit} at every load tested"
    else:
        text = (
            f"knee: {knee['coachees']} concurrent coachee(s) - the lowest load whose p95 orchestration overhead "
            f"({knee['p95_overhead_ms']:.0f} ms) exceeds {limit}"
        )
    if knee.get("baseline_p95_ms") is not None:
        if knee["load_coachees"] is None:
            text += f"; load never added more than {limit} to the 1-coachee p95 ({knee['baseline_p95_ms']:.0f} ms)"
        else:
            text += (
                f"; load knee: {knee['load_coachees']} coachees, where p95 ({knee['load_p95_overhead_ms']:.0f} ms) "
                f"first exceeds the 1-coachee p95 ({knee['baseline_p95_ms']:.0f} ms) by more than {limit}"
            )
    return text


def real_model_text(real: dict[str, Any]) -> str:
    if real.get("error"):
        return f"real model (llama.cpp + SmolLM2-135M): {real['error']}"
    lines = [
        f"real model (llama.cpp + SmolLM2-135M, CPU): one turn, {real['outcome']}, "
        f"wall {_num(real['wall_s'])} s, Coach first token {_num(real['coach_first_token_s'])} s",
        f"  {'agent':<11} {'round':>5} {'status':>10} {'time s':>8} {'prompt tok':>11} {'completion tok':>15}",
    ]
    for run in real["runs"]:
        seconds = None if run["latency_ms"] is None else run["latency_ms"] / 1000
        lines.append(
            f"  {run['agent']:<11} {run['round']:>5} {run['status']:>10} {_num(seconds):>8} "
            f"{run['prompt_tokens'] or '-':>11} {run['completion_tokens'] or '-':>15}"
            + (f"  ({run['error']})" if run.get("error") else "")
        )
    return "\n".join(lines)


def projection_text(proj: dict[str, Any]) -> str:
    lines = [
        f"{proj['label']}: {proj['formula']}",
        f"  tokens from: {proj['token_source']}; overhead: {proj['overhead_source']}",
    ]
    for result in proj["results"]:
        hw = result["hardware"]
        if "error" in result:
            lines.append(f"  {hw['name']}: {result['error']}")
            continue
        terms = " + ".join(
            f"{agent} ({t['prompt_tokens']}/{hw['prefill_tok_s']:.0f} + {t['completion_tokens']}/"
            f"{hw['decode_tok_s']:.0f} = {t['seconds']:.2f} s)"
            for agent, t in result["terms"].items()
        )
        lines.append(
            f"  {hw['name']} (assumed prefill {hw['prefill_tok_s']:.0f} tok/s, decode {hw['decode_tok_s']:.0f} tok/s): "
            f"{terms} + overhead {result['overhead_s']:.2f} s = {result['turn_s']:.1f} s "
            f"(original system ~{result['vs_original_s']:.0f} s)"
        )
    return "\n".join(lines)


def write_results(out_dir: Path, results: dict[str, Any], text_table: str, md_table: str) -> tuple[Path, Path]:
    meta = results["meta"]
    stem = f"results-{meta['date']}-{meta['commit']}" + ("" if meta.get("metrics", True) else "-no-metrics")
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / f"{stem}.json"
    # Compact: a full run holds every turn's figures (about a megabyte).
    json_path.write_text(json.dumps(results, separators=(",", ":"), default=str) + "\n")
    md_path = out_dir / f"{stem}.md"
    machine = meta["machine"]
    redrawn = "reanalysed_at" in meta
    md = [
        f"# Benchmark results {meta['date']} ({meta['commit']})",
        "",
        f"Machine: {machine['nproc']} x {machine['cpu_model']}, {machine['memory_gib']} GiB, "
        f"Python {machine['python']}. Started {meta['started_at']} UTC; raw figures in `{json_path.name}`. "
        "Model: the simulator (TTFT {ttft_ms:g} ms, {tokens_per_s:g} tokens/s); see README.md.".format(
            **meta["profile"]["default"]
        )
        + (f" Web: {webs} Daphne processes, coachees dealt out in turn." if (webs := web_processes(meta)) > 1 else "")
        + (f" Conclusions re-drawn from the raw figures at {meta['reanalysed_at']} UTC." if redrawn else ""),
        "",
        md_table,
        "",
        results["knee_text"],
        "",
        *[f"- {line}" for line in results["diagnosis"]],
        "",
    ]
    if results.get("real_model"):
        md += ["```", real_model_text(results["real_model"]), "```", ""]
    if results.get("projection"):
        md += ["```", projection_text(results["projection"]), "```", ""]
    md_path.write_text("\n".join(md))
    return json_path, md_path


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
