"""The engine trial's report: one Markdown page (printed, and written beside the JSON)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.metrics import percentile

# Issue 15's targets for the ten turns in Chromium.
FIRST_TOKEN_P50_S = 3.0
FULL_ANSWER_P50_S = 60.0
FULL_ANSWER_P95_S = 120.0


def seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def one_line(text: str, limit: int = 140) -> str:
    flat = " ".join(text.split()).replace("|", "\\|")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def latency_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """p50/p95 of the timings, and whether they meet the targets. Coach's first token is judged on
    the turns Coach's model answered: the crisis pre-gate's fixed reply shows at once."""
    first_all = [r["first_token_s"] for r in rows if r["first_token_s"] is not None]
    model_rows = [r for r in rows if not r.get("pregate")]
    first = [r["first_token_s"] for r in model_rows if r["first_token_s"] is not None]
    full = [r["full_answer_s"] for r in rows if r["full_answer_s"] is not None]
    p50_first, p50_full, p95_full = percentile(first, 50), percentile(full, 50), percentile(full, 95)
    # A turn without a measurement (no Coach text, no answer in time) fails the target outright.
    return {
        "turns": len(rows),
        "first_token_all": {
            "n": len(first_all),
            "p50_s": percentile(first_all, 50),
            "p95_s": percentile(first_all, 95),
        },
        "first_token": {"n": len(first), "p50_s": p50_first, "p95_s": percentile(first, 95)},
        "full_answer": {"n": len(full), "p50_s": p50_full, "p95_s": p95_full},
        "meets": {
            "first_token_p50": p50_first is not None
            and p50_first <= FIRST_TOKEN_P50_S
            and len(first) == len(model_rows),
            "full_answer_p50": p50_full is not None and p50_full <= FULL_ANSWER_P50_S and len(full) == len(rows),
            "full_answer_p95": p95_full is not None and p95_full <= FULL_ANSWER_P95_S and len(full) == len(rows),
        },
    }


def verdict(ok: bool) -> str:
    return "meets" if ok else "**misses**"


def app_section(results: dict[str, Any]) -> list[str]:
    app = results["app"]
    machine = results["machine"]
    lines = [
        f"Commit {results['commit']}, {results['started_at']} UTC; {machine['nproc']} cores ({machine['cpu_model']}), "
        f"{machine['memory_gib']} GiB.",
        "",
    ]
    if app.get("ready_s") is not None:
        model = f" (the model server's warm-up: {app['model_ready_s']} s)" if app.get("model_ready_s") else ""
        lines.append(
            f"**Ready**: scripts/run.sh printed where to log in {app['ready_s']:.0f} s after it started{model}."
        )
    else:
        lines.append(f"App: the one already running at {app['url']} (its start not measured).")
    kinds = sorted({f"{e['kind']} {e['model']}" for e in results["endpoints"]})
    lines += ["", f"Endpoints of the agents: {', '.join(kinds)}."]
    for phase, load in results.get("cpu", {}).items():
        lines.append(
            f"CPU during the {phase} turns: the machine {load['machine_pct']:.0f} % busy, the trial's own processes "
            f"{load['ours_pct']:.0f} % ({load['ours_what']}); 100 % = every core."
        )
    return lines


def browser_section(results: dict[str, Any]) -> list[str]:
    rows = [r for r in results["turns"] if r["phase"] == "browser"]
    if not rows:
        return []
    summary = results["browser"]
    first, full, meets = summary["first_token"], summary["full_answer"], summary["meets"]
    pregate = sum(1 for r in rows if r.get("pregate"))
    first_label = "Coach's first token visible" + (f" ({pregate} pre-gate turns left out)" if pregate else "")
    lines = [
        "",
        f"## {len(rows)} turns in Chromium (one coachee, one after another)",
        "",
        *table(
            ["measured from the Send click", "p50", "p95", "n", "target"],
            [
                [
                    first_label,
                    seconds(first["p50_s"]),
                    seconds(first["p95_s"]),
                    first["n"],
                    f"p50 ≤ {FIRST_TOKEN_P50_S:g} s: {verdict(meets['first_token_p50'])}",
                ],
                [
                    "full answer visible",
                    seconds(full["p50_s"]),
                    seconds(full["p95_s"]),
                    full["n"],
                    f"p50 ≤ {FULL_ANSWER_P50_S:g} s: {verdict(meets['full_answer_p50'])}; "
                    f"p95 ≤ {FULL_ANSWER_P95_S:g} s: {verdict(meets['full_answer_p95'])}",
                ],
            ],
        ),
        "",
        "p50/p95 interpolate between the turns (numpy's default). A turn without a measurement fails its target.",
        "",
        *turn_table(rows),
    ]
    if results.get("browser_errors"):
        lines += ["", "Errors on the page: " + "; ".join(results["browser_errors"][:5])]
    return lines


def turn_table(rows: list[dict[str, Any]]) -> list[str]:
    body = []
    for r in rows:
        body.append(
            [
                r["conversation"],
                r["index"],
                r.get("turn_id") or "-",
                seconds(r["first_token_s"]),
                seconds(r["full_answer_s"]),
                r.get("status", "lost" if r["lost"] else "-"),
                r.get("coach_status") or "-",
                "yes" if r.get("fallback") else "",
                "yes" if r.get("degraded") else "",
                r.get("escalation", "-") + (" (pre-gate)" if r.get("pregate") else ""),
                ", ".join(r.get("blocked") or []) or "",
                one_line(r.get("flag_reason") or r.get("error") or "", 90),
            ]
        )
    header = ["conversation", "#", "turn", "first token", "full answer", "status", "Coach", "fallback", "degraded"]
    return table([*header, "escalation", "blocked moves", "flag / error"], body)


def risk_section(results: dict[str, Any]) -> list[str]:
    rows = [r for r in results["turns"] if r["phase"] == "risk"]
    if not rows:
        return []
    summary = results["risk"]
    return [
        "",
        f"## {len(rows)} turns of conversations with known risks ({results['risk_concurrency']} coachees at once)",
        "",
        f"First token p50 {seconds(summary['first_token']['p50_s'])}, full answer p50 "
        f"{seconds(summary['full_answer']['p50_s'])}, p95 {seconds(summary['full_answer']['p95_s'])} "
        "(side by side: not the latency targets).",
        "",
        *turn_table(rows),
    ]


def shown_section(results: dict[str, Any]) -> list[str]:
    checked = results["shown"]
    counted = [c for c in checked if c["counted"]]
    junk = [c for c in counted if c["junk"]]
    blocked = [c for c in counted if c["blocked"]]
    by_phase = {
        phase: [c for c in counted if (c["conversation"] == "browser") == (phase == "browser")]
        for phase in ("browser", "risk")
    }
    lines = [
        "",
        "## What the coachees saw, checked again",
        "",
        "Every Coach reply that was not withdrawn, every full answer and fallback, through the quality gate "
        "(agents/safety/quality) with every agent prompt as the system's wording, and the moves blocked for that "
        "coachee "
        "at that turn (previous turn's Stability, this turn's Stability and brief). Moves were blocked in "
        f"{results['totals']['turns_with_blocked_moves']} of {results['totals']['turns']} turns.",
        "",
        *table(
            ["turns", "texts shown", "junk (gate findings)", "with a blocked move"],
            [
                [
                    phase,
                    len(texts),
                    sum(1 for c in texts if c["junk"]),
                    sum(1 for c in texts if c["blocked"]),
                ]
                for phase, texts in by_phase.items()
                if texts
            ],
        ),
    ]
    for title, items, key in (
        ("Junk that reached a coachee", junk, "junk"),
        ("Blocked moves shown", blocked, "blocked"),
    ):
        if items:
            lines += ["", f"{title}:", ""]
            lines += [
                f"- {c['conversation']} #{c['index']} (turn {c['turn_id']}), {c['surface']} {c['kind']}: "
                f'{"; ".join(c[key])}: "{one_line(c["text"])}"'
                for c in items
            ]
    streamed = [c for c in checked if c["kind"] == "streamed, then withdrawn"]
    notices = [c for c in checked if c["kind"] == "withdrawn notice"]
    if notices:
        lines += [
            "",
            f"Coach replies withdrawn by the gate: {len(notices)} (the notice replaced them: "
            f'"{one_line(notices[0]["text"], 100)}").',
        ]
    if streamed:
        lines += ["", "On screen while they streamed, before the gate withdrew them at their end:", ""]
        lines += [
            f"- {c['conversation']} #{c['index']}: {'; '.join(c['junk'] + c['blocked']) or 'no finding now'}: "
            f'"{one_line(c["text"])}"'
            for c in streamed
        ]
    counts = results["gate_counts"]
    lines += ["", "The gate's own record (QualityFinding rows of these turns):", ""]
    if counts:
        lines += table(
            ["surface", "check", "action", "count"],
            [[c["surface"], c["check"], c["action"], c["count"]] for c in counts],
        )
    else:
        lines.append("none")
    return lines


def validity_section(results: dict[str, Any]) -> list[str]:
    validity = results["validity"]
    totals = validity["totals"]
    rows = [
        [
            a["agent"],
            a["runs"],
            a["calls"],
            a["valid_first"],
            a["valid_after_repair"],
            a["invalid"],
            a["other_failures"],
            a["unfinished"],
        ]
        for a in validity["agents"]
    ]
    first_pct = 100.0 * totals["valid_first"] / totals["runs"] if totals["runs"] else 0.0
    valid_pct = 100.0 * totals["valid_runs"] / totals["runs"] if totals["runs"] else 0.0
    call_pct = 100.0 * totals["valid_runs"] / totals["calls"] if totals["calls"] else 0.0
    lines = [
        "",
        "## Structured output per agent",
        "",
        *table(
            ["agent", "runs", "calls", "valid 1st", "valid after repair", "invalid", "other failures", "unfinished"],
            rows,
        ),
        "",
        f"All JSON agents: {totals['runs']} runs, {totals['calls']} calls; valid at the first attempt "
        f"{totals['valid_first']} of {totals['runs']} runs ({first_pct:.1f} %), valid in the end "
        f"{totals['valid_runs']} ({valid_pct:.1f} %); {call_pct:.1f} % of calls returned valid output. "
        "After repair: a second call with the errors named, or a resample of an answer cut off by its token limit. "
        "Other failures: nothing to judge (the stage's deadline, the server).",
    ]
    if validity["failures"]:
        lines += ["", "Failures:", ""]
        for f in validity["failures"]:
            errors = "; ".join(f["validation_errors"])
            lines.append(
                f"- {f['agent']} turn {f['turn_id']} round {f['round']}, {f['attempts']} attempt(s): "
                f"{one_line(f['error'], 120)} {one_line(errors, 160)}; raw {f['raw_chars']} chars, "
                f"{f['completion_tokens']} tokens, ends `{one_line(f['raw_end'], 160)}`"
            )
    return lines


def durations_section(results: dict[str, Any]) -> list[str]:
    rows = [[d["agent"], d["n"], seconds(d["p50_s"]), seconds(d["p95_s"])] for d in results["durations"]]
    totals = results["totals"]
    escalations = ", ".join(f"{k} {v}" for k, v in totals["escalations"].items()) or "none"
    return [
        "",
        "## Agent durations (AgentRun.latency_ms, waiting for a slot included)",
        "",
        *table(["agent", "runs", "p50", "p95"], rows),
        "",
        "## Totals",
        "",
        f"{totals['messages_sent']} messages sent, {totals['turns']} turns ended ({totals['done']} done, "
        f"{totals['lost']} not ended in time); degraded {totals['degraded']}, fallbacks {totals['fallbacks']}, "
        f"flagged {totals['flagged']}, Coach withdrawn {totals['coach_withdrawn']}; escalations: {escalations} "
        f"({totals['pregate']} by the crisis pre-gate at accept). "
        f"Texts shown {totals['texts_shown']}: junk {totals['junk_shown']}, "
        f"with a blocked move {totals['blocked_move_shown']} (moves were blocked in "
        f"{totals['turns_with_blocked_moves']} of {totals['turns']} turns).",
    ]


def render(results: dict[str, Any]) -> str:
    lines = [f"# Engine trial {results['stamp']}", ""]
    lines += app_section(results)
    lines += browser_section(results)
    lines += risk_section(results)
    lines += shown_section(results)
    lines += validity_section(results)
    lines += durations_section(results)
    if results.get("errors"):
        lines += ["", "## Errors", ""] + [f"- {e}" for e in results["errors"]]
    return "\n".join(lines) + "\n"


def write_json(out_dir: Path, results: dict[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"engine-trial-{results['stamp']}.json"
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False, default=str) + "\n")
    return path


def write(out_dir: Path, results: dict[str, Any], markdown: str) -> tuple[Path, Path]:
    json_path = write_json(out_dir, results)
    md_path = json_path.with_suffix(".md")
    md_path.write_text(markdown)
    return json_path, md_path
