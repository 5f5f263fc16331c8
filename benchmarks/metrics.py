"""Per-turn figures from three sources, and their summaries. Pure functions: no I/O, no Django.

* the client: wall-clock receive time of every WebSocket frame (load.py);
* the simulator's call log: `received_at`, `first_token_at`, `finished_at`, `chunk_times` of
  every model call, tagged with the agent and turn (X-Coaching-Agent / X-Coaching-Turn);
* the database: the turn's status, its persisted events and its agent runs (app.py).

All three use the same machine clock (time.time()), so their differences are latencies.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from agents.llm.simulator.tokens import token_pieces
from benchmarks.load import SentTurn

SPECIALISTS = ("persona", "plasticity", "stability")
KNEE_OVERHEAD_MS = 300.0

# (key, label) of every per-turn figure summarised as p50 / p95, in table order.
FIGURES: tuple[tuple[str, str], ...] = (
    ("coach_first_token_app_ms", "Coach 1st token, app-added (ms)"),
    ("coach_first_text_model_ms", "Coach 1st text: model time past its 1st token (ms)"),
    ("wall_ms", "turn wall time (ms)"),
    ("critical_path_ms", "model critical path (ms)"),
    ("overhead_ms", "orchestration overhead (ms)"),
    ("wall_over_critical", "wall / critical path"),
    ("specialist_spread_ms", "specialists' start spread (ms)"),
    ("parallel_efficiency", "specialists' parallel efficiency"),
    ("relay_ms", "token relay, per delta frame (ms)"),
    # Where the time goes (see docs/bench/README.md for each boundary).
    ("ack_ms", "send -> message.accepted (ms)"),
    ("coach_run_created_ms", "send -> Coach run row (ms)"),
    ("coach_call_start_ms", "send -> Coach model call (ms)"),
    ("shadow_call_start_ms", "send -> Shadow model call (ms)"),
    ("gap_shadow_to_specialists_ms", "Shadow call end -> 1st specialist call (ms)"),
    ("stage_shadow_to_specialists_ms", "  of which run end -> run start (ms)"),
    ("gap_specialists_to_synth_ms", "last specialist call end -> Synth call (ms)"),
    ("stage_specialists_to_synth_ms", "  of which run end -> run start (ms)"),
    ("gap_synth_to_critic_ms", "Synth call end -> critic call (ms)"),
    ("delivery_ms", "last call end -> turn.done received (ms)"),
    ("agent_pre_call_ms", "agent run start -> its model call (ms)"),
    ("agent_post_call_ms", "agent model call end -> run end (ms)"),
)
# Figures with one value per frame or per agent rather than per turn: pooled over all turns.
POOLED = frozenset({"relay_ms", "agent_pre_call_ms", "agent_post_call_ms"})
JSON_AGENTS = ("shadow", *SPECIALISTS, "synth", "critic")
RUN_FIELDS = ("agent", "round", "status", "prompt_tokens", "completion_tokens", "latency_ms")


@dataclass
class TurnFacts:
    """What the database says about one turn."""

    status: str
    degraded: bool
    flagged: bool
    persisted_events: int  # SessionEvent rows whose payload names this turn
    synth_done_events: int
    runs: list[dict[str, Any]] = field(default_factory=list)  # agent, round, status, tokens, latency_ms


def percentile(values: list[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 1)


def _duration(call: dict[str, Any]) -> float | None:
    if call.get("finished_at") is None or call.get("received_at") is None:
        return None
    return float(call["finished_at"]) - float(call["received_at"])


def _total_duration(calls: list[dict[str, Any]]) -> float | None:
    """An agent's time on the model: the sum of its calls (retries and repairs included)."""
    durations = [_duration(c) for c in calls]
    return None if not durations or any(d is None for d in durations) else sum(d for d in durations if d is not None)


def delta_token_times(
    deltas: list[tuple[float, int, str]], coach_text: str, chunk_times: list[float]
) -> list[float | None]:
    """For each coach.delta frame: when the model emitted the last token it holds (None when unknown).

    The simulator streams one token per chunk (`token_pieces`), so the token that ends at the
    frame's end offset (offset + len(text)) is found by the cumulative length of the pieces.
    """
    ends: list[int] = []
    total = 0
    for piece in token_pieces(coach_text):
        total += len(piece)
        ends.append(total)
    times: list[float | None] = []
    for _, offset, text in deltas:
        index = bisect.bisect_left(ends, offset + len(text))
        times.append(chunk_times[index] if index < len(chunk_times) else None)
    return times


def relay_latencies(deltas: list[tuple[float, int, str]], coach_text: str, chunk_times: list[float]) -> list[float]:
    """For each coach.delta frame: receive time minus the emission time of the last token it holds."""
    emitted = delta_token_times(deltas, coach_text, chunk_times)
    return [received_at - at for (received_at, _, _), at in zip(deltas, emitted, strict=True) if at is not None]


def turn_figures(
    sent: SentTurn, events: list[tuple[float, dict[str, Any]]], calls: list[dict[str, Any]], facts: TurnFacts | None
) -> dict[str, Any]:
    """Every figure of one turn; None where its inputs are missing (a lost or failed turn)."""
    first: dict[str, float] = {}
    counts: Counter[str] = Counter()
    seqs: Counter[int] = Counter()
    deltas: list[tuple[float, int, str]] = []
    coach_text = ""
    fallback = False
    done: dict[str, Any] | None = None
    errors: list[str] = []
    for at, event in events:
        kind = str(event.get("type"))
        counts[kind] += 1
        first.setdefault(kind, at)
        if "seq" in event and event["seq"] is not None:
            seqs[int(event["seq"])] += 1
        if kind == "coach.delta":
            deltas.append((at, int(event["offset"]), str(event["text"])))
        elif kind == "coach.done":
            coach_text = str(event.get("text", ""))
        elif kind == "synth.done":
            fallback = fallback or bool(event.get("fallback"))
        elif kind == "turn.done":
            done = event
        elif kind == "error":
            errors.append(str(event.get("code")))

    by_agent: dict[str, list[dict[str, Any]]] = {}
    for call in sorted(calls, key=lambda c: float(c["received_at"])):
        by_agent.setdefault(str(call["agent"]), []).append(call)

    def call_time(agent: str, key: str, which: int = 0) -> float | None:
        agent_calls = by_agent.get(agent) or []
        value = agent_calls[which].get(key) if agent_calls else None
        return None if value is None else float(value)

    wall = first["turn.done"] - sent.sent_at if "turn.done" in first else None
    coach_received, coach_first_token = call_time("coach", "received_at"), call_time("coach", "first_token_at")
    coach_ttft = None if coach_received is None or coach_first_token is None else coach_first_token - coach_received

    shadow = _total_duration(by_agent.get("shadow", []))
    specialist = {a: _total_duration(by_agent.get(a, [])) for a in SPECIALISTS}
    synth = _total_duration(by_agent.get("synth", []))
    critic = _total_duration(by_agent.get("critic", []))
    parts = [shadow, synth, critic, *specialist.values()]
    critical = None
    if all(p is not None for p in parts):
        critical = (shadow or 0) + max(v or 0 for v in specialist.values()) + (synth or 0) + (critic or 0)

    spread = efficiency = None
    starts = [call_time(a, "received_at") for a in SPECIALISTS]
    ends = [call_time(a, "finished_at", -1) for a in SPECIALISTS]
    if all(s is not None for s in starts) and all(e is not None for e in ends):
        s_list = [s for s in starts if s is not None]
        e_list = [e for e in ends if e is not None]
        spread = max(s_list) - min(s_list)
        span = max(e_list) - min(s_list)
        if span > 0 and all(v is not None for v in specialist.values()):
            efficiency = sum(v or 0 for v in specialist.values()) / (3 * span)

    def gap(later: float | None, earlier: float | None) -> float | None:
        return None if later is None or earlier is None else later - earlier

    runs: dict[str, dict[str, Any]] = {r["agent"]: r for r in (facts.runs if facts else []) if r["round"] == 1}

    def run_time(agent: str, key: str) -> float | None:
        value = runs.get(agent, {}).get(key)
        return None if value is None else float(value)

    # App time inside each JSON agent's run, before and after its model call (single-call runs only).
    pre_call, post_call = [], []
    for agent in JSON_AGENTS:
        agent_calls = [c for c in by_agent.get(agent, []) if c.get("finished_at")]
        if agent in runs and len(agent_calls) == 1 and runs[agent].get("finished_at"):
            pre_call.append(float(agent_calls[0]["received_at"]) - float(runs[agent]["started_at"]))
            post_call.append(float(runs[agent]["finished_at"]) - float(agent_calls[0]["finished_at"]))
    spec_run_starts = [t for a in SPECIALISTS if (t := run_time(a, "started_at")) is not None]
    spec_run_ends = [t for a in SPECIALISTS if (t := run_time(a, "finished_at")) is not None]

    last_model_end = max(
        (float(c["finished_at"]) for a in ("synth", "critic") for c in by_agent.get(a, []) if c.get("finished_at")),
        default=None,
    )
    chunk_times = [float(t) for t in (by_agent.get("coach") or [{}])[0].get("chunk_times", [])]
    relay = relay_latencies(deltas, coach_text or "".join(t for _, _, t in deltas), chunk_times)
    # Coach's first visible text: what the app added (the send to the model call, and the relay
    # once the model had emitted the frame's last token), and how long the model took to write
    # the words the live check waits for (LIVE_CHECK_FIRST_WORDS), past its first token.
    coach_app = coach_held = None
    if deltas and coach_received is not None and coach_first_token is not None:
        last_token_at = delta_token_times(deltas[:1], coach_text or deltas[0][2], chunk_times)[0]
        if last_token_at is not None:
            coach_app = (coach_received - sent.sent_at) + (deltas[0][0] - last_token_at)
            coach_held = last_token_at - coach_first_token

    duplicated = any(n > 1 for n in seqs.values()) or counts["turn.done"] > 1 or counts["synth.done"] > 1
    if facts is not None and facts.synth_done_events > 1:
        duplicated = True
    failed_runs = [r["agent"] for r in (facts.runs if facts else []) if r["status"] != "succeeded"]
    if sent.lost or done is None:
        outcome = "lost"
    elif done.get("status") != "done" or done.get("degraded") or fallback or errors or failed_runs:
        outcome = "failed"
    else:
        outcome = "ok"

    return {
        "coachee": sent.coachee,
        "index": sent.index,
        "client_id": sent.client_id,
        "turn_id": sent.turn_id,
        "sent_at": sent.sent_at,
        "outcome": outcome,
        "duplicated": duplicated,
        "status": done.get("status") if done else None,
        "degraded": bool(done.get("degraded")) if done else None,
        "fallback": fallback,
        "errors": errors,
        "failed_agents": failed_runs,
        "wall_ms": _ms(wall),
        "ack_ms": _ms(gap(first.get("message.accepted"), sent.sent_at)),
        "coach_sim_ttft_ms": _ms(coach_ttft),
        "coach_first_token_app_ms": _ms(coach_app),
        "coach_first_text_model_ms": _ms(coach_held),
        "shadow_ms": _ms(shadow),
        "specialists_ms": {a: _ms(v) for a, v in specialist.items()},
        "synth_ms": _ms(synth),
        "critic_ms": _ms(critic),
        "critical_path_ms": _ms(critical),
        "overhead_ms": _ms(None if wall is None or critical is None else wall - critical),
        "wall_over_critical": round(wall / critical, 3) if wall is not None and critical else None,
        "specialist_spread_ms": _ms(spread),
        "parallel_efficiency": round(efficiency, 3) if efficiency is not None else None,
        "coach_call_start_ms": _ms(gap(call_time("coach", "received_at"), sent.sent_at)),
        "shadow_call_start_ms": _ms(gap(call_time("shadow", "received_at"), sent.sent_at)),
        "gap_shadow_to_specialists_ms": _ms(
            gap(min((s for s in starts if s is not None), default=None), call_time("shadow", "finished_at", -1))
        ),
        "gap_specialists_to_synth_ms": _ms(
            gap(call_time("synth", "received_at"), max((e for e in ends if e is not None), default=None))
        ),
        "coach_run_created_ms": _ms(gap(run_time("coach", "started_at"), sent.sent_at)),
        "stage_shadow_to_specialists_ms": _ms(
            gap(min(spec_run_starts, default=None), run_time("shadow", "finished_at"))
        ),
        "stage_specialists_to_synth_ms": _ms(
            gap(run_time("synth", "started_at"), max(spec_run_ends, default=None) if len(spec_run_ends) == 3 else None)
        ),
        "agent_pre_call_ms": [round(v * 1000.0, 1) for v in pre_call],
        "agent_post_call_ms": [round(v * 1000.0, 1) for v in post_call],
        "gap_synth_to_critic_ms": _ms(gap(call_time("critic", "received_at"), call_time("synth", "finished_at"))),
        "delivery_ms": _ms(gap(first.get("turn.done"), last_model_end)),
        "relay_ms": [round(r * 1000.0, 1) for r in relay],
        "model_calls": len(calls),
        "coach_delta_frames": counts["coach.delta"],
        # The crisis card took Coach's place; the coachee's later replies are held until checked
        # (reply_gate.risks_known), so their first token is not measured either.
        "crisis_card": counts["safety.notice"] > 0,
        "frames_received": sum(counts.values()),
        "persisted_events": facts.persisted_events if facts else None,
        "channel_messages": (facts.persisted_events + counts["coach.delta"]) if facts else None,
        "db_status": facts.status if facts else None,
        # Compact, one list per run: see RUN_FIELDS.
        "agent_runs": [[r[f] for f in RUN_FIELDS] for r in (facts.runs if facts else [])],
    }


def summarize(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """p50 / p95 of every figure over the turns that have it, outcome counts and throughput."""
    figures: dict[str, dict[str, Any]] = {}
    for key, _label in FIGURES:
        if key in POOLED:
            values = [float(v) for t in turns for v in t[key]]
        else:
            values = [float(t[key]) for t in turns if t.get(key) is not None]
        p50, p95 = percentile(values, 50), percentile(values, 95)
        figures[key] = {
            "p50": None if p50 is None else round(p50, 3),
            "p95": None if p95 is None else round(p95, 3),
            "n": len(values),
        }
    finished = [t for t in turns if t["outcome"] != "lost" and t["wall_ms"] is not None]
    window = None
    if finished:
        last_done = max(t["sent_at"] + t["wall_ms"] / 1000.0 for t in finished)
        window = last_done - min(t["sent_at"] for t in turns)
    per_turn = [t for t in turns if t["persisted_events"] is not None]
    return {
        "turns": len(turns),
        "ok": sum(t["outcome"] == "ok" for t in turns),
        "failed": sum(t["outcome"] == "failed" for t in turns),
        "lost": sum(t["outcome"] == "lost" for t in turns),
        "duplicated": sum(bool(t["duplicated"]) for t in turns),
        "crisis_cards": sum(bool(t.get("crisis_card")) for t in turns),
        "turns_per_s": round(len(finished) / window, 3) if window else None,
        "figures": figures,
        "persisted_events_per_turn": _mean([t["persisted_events"] for t in per_turn]),
        "coach_delta_frames_per_turn": _mean([t["coach_delta_frames"] for t in turns]),
        "channel_messages_per_turn": _mean([t["channel_messages"] for t in per_turn]),
        "model_calls_per_turn": _mean([t["model_calls"] for t in turns]),
    }


def _mean(values: list[Any]) -> float | None:
    return round(sum(values) / len(values), 1) if values else None


def find_knee(scenarios: list[dict[str, Any]], threshold_ms: float = KNEE_OVERHEAD_MS) -> dict[str, Any]:
    """The lowest concurrency whose p95 orchestration overhead exceeds the threshold (`coachees`),
    and the lowest whose p95 exceeds the 1-coachee p95 by the threshold (`load_coachees`): the
    first says where the target is missed, the second where load (not per-turn work) starts to cost."""
    ordered = sorted(scenarios, key=lambda s: s["coachees"])

    def p95(scenario: dict[str, Any]) -> float | None:
        value = scenario["summary"]["figures"]["overhead_ms"]["p95"]
        return None if value is None else float(value)

    knee: dict[str, Any] = {"threshold_ms": threshold_ms, "coachees": None, "scenario": None, "p95_overhead_ms": None}
    for scenario in ordered:
        value = p95(scenario)
        if value is not None and value > threshold_ms:
            knee.update(coachees=scenario["coachees"], scenario=scenario["name"], p95_overhead_ms=value)
            break
    base = p95(ordered[0]) if ordered else None
    knee.update(baseline_p95_ms=base, load_coachees=None, load_scenario=None, load_p95_overhead_ms=None)
    for scenario in ordered[1:]:
        value = p95(scenario)
        if value is not None and base is not None and value > base + threshold_ms:
            knee.update(load_coachees=scenario["coachees"], load_scenario=scenario["name"], load_p95_overhead_ms=value)
            break
    return knee
