"""A projection of a full turn on real GPUs. A PROJECTION, not a measurement.

    turn_s = sum over the critical path (shadow, slowest specialist, synth, critic) of
                 prompt_tokens / prefill_rate + completion_tokens / decode_rate
             + measured orchestration overhead

Token counts come from the benchmark's own turns (the real-model turn when it ran); the
rates are assumptions taken from published single-stream figures, with their sources in
docs/bench/README.md. It ignores prefix caching (which makes prefill cheaper after the
first agent of a turn) and the small per-stream slowdown of three specialists decoding at
once, so it errs on both sides a little; it is a sizing aid, not a promise.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from benchmarks.metrics import SPECIALISTS

ORIGINAL_TURN_S = 40.0  # the system this one replaces, per the issue


@dataclass(frozen=True)
class Hardware:
    name: str
    prefill_tok_s: float
    decode_tok_s: float
    source: str


HARDWARE = (
    Hardware(
        name="2x RTX 4090, Qwen3-30B-A3B, vLLM TP=2",
        prefill_tok_s=3000.0,
        decode_tok_s=120.0,
        source="decode: 196 tok/s on one RTX 4090 (llama.cpp Q4, runaihome.com) and 167 tok/s on a "
        "3090 Ti (smeltcore.com), less for TP=2 all-reduce over PCIe; prefill: assumed (see README)",
    ),
    Hardware(
        name="1x H100, Qwen3-30B-A3B, vLLM",
        prefill_tok_s=10000.0,
        decode_tok_s=170.0,
        source="decode: 172.5 tok/s single user, 1024 in / 256 out, for the 35B-A3B FP8 MoE on 1x H100 "
        "(luminal.com inference report); prefill: assumed (see README)",
    ),
)

FORMULA = (
    "turn_s = sum over {shadow, slowest specialist, synth, critic} of "
    "(prompt_tokens / prefill_tok_s + completion_tokens / decode_tok_s) + orchestration_overhead_s"
)


@dataclass(frozen=True)
class AgentTokens:
    agent: str
    prompt_tokens: float
    completion_tokens: float


def tokens_of_turn(runs: list[dict[str, Any]]) -> dict[str, AgentTokens]:
    """Per agent, tokens summed over its rounds (a repair's tokens are already in its run)."""
    totals: dict[str, list[float]] = {}
    for run in runs:
        pair = totals.setdefault(run["agent"], [0.0, 0.0])
        pair[0] += run.get("prompt_tokens") or 0
        pair[1] += run.get("completion_tokens") or 0
    return {agent: AgentTokens(agent, p, c) for agent, (p, c) in totals.items()}


def median_tokens(turns_runs: list[list[dict[str, Any]]]) -> dict[str, AgentTokens]:
    """The median turn's tokens per agent, over many turns (when no real-model turn ran)."""
    per_agent: dict[str, list[AgentTokens]] = {}
    for runs in turns_runs:
        for agent, tokens in tokens_of_turn(runs).items():
            per_agent.setdefault(agent, []).append(tokens)
    return {
        agent: AgentTokens(
            agent,
            statistics.median(t.prompt_tokens for t in values),
            statistics.median(t.completion_tokens for t in values),
        )
        for agent, values in per_agent.items()
    }


def _seconds(tokens: AgentTokens, hw: Hardware) -> float:
    return tokens.prompt_tokens / hw.prefill_tok_s + tokens.completion_tokens / hw.decode_tok_s


def project(tokens: dict[str, AgentTokens], overhead_s: float, hw: Hardware) -> dict[str, Any]:
    """The projected turn time on one hardware, with each term of the sum."""
    missing = [a for a in ("shadow", *SPECIALISTS, "synth", "critic") if a not in tokens]
    if missing:
        return {"hardware": asdict(hw), "error": f"no token counts for {', '.join(missing)}"}
    slowest = max(SPECIALISTS, key=lambda a: _seconds(tokens[a], hw))
    path = ("shadow", slowest, "synth", "critic")
    terms = {
        agent: {
            "prompt_tokens": round(tokens[agent].prompt_tokens),
            "completion_tokens": round(tokens[agent].completion_tokens),
            "seconds": round(_seconds(tokens[agent], hw), 2),
        }
        for agent in path
    }
    total = sum(t["seconds"] for t in terms.values()) + overhead_s
    return {
        "hardware": asdict(hw),
        "slowest_specialist": slowest,
        "terms": terms,
        "overhead_s": round(overhead_s, 3),
        "turn_s": round(total, 1),
        "vs_original_s": ORIGINAL_TURN_S,
        "speedup_vs_original": round(ORIGINAL_TURN_S / total, 1) if total > 0 else None,
    }


def projection(tokens: dict[str, AgentTokens], overhead_s: float, token_source: str) -> dict[str, Any]:
    return {
        "label": "PROJECTION (not a measurement)",
        "formula": FORMULA,
        "token_source": token_source,
        "overhead_source": "p50 orchestration overhead of the 1-coachee scenario",
        "results": [project(tokens, overhead_s, hw) for hw in HARDWARE],
    }
