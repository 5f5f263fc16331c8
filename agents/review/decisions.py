"""What arbitration and the checks decided on a turn, as a coach reads it: the conflicts and how
each was resolved, the brief, the critic gate's rounds and the checks that failed."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agents.models import Turn
from agents.review.labels import AGENT_LABELS, MoveName, moves_named

RULE_LABELS = {
    "blocked_move_dropped": "A move Stability blocks is dropped",
    "high_risk_overrides_push": "A high risk overrides a pushing strategy",
    "escalation_changes_brief": "Escalation changes the brief",
    "stability_missing_conservative": "Stability missing: conservative brief",
}


@dataclass
class ConflictView:
    rule: str
    rule_label: str
    left_agent: str
    left_claim: list[tuple[str, str]]
    right_agent: str
    right_claim: list[tuple[str, str]]
    resolution: str


def _claim_value(key: str, value: Any, catalog: dict[str, str]) -> str:
    if key in ("suggested_move", "blocked_move") and isinstance(value, str):
        return str(moves_named([value], catalog)[0])
    if key in ("suggested_moves", "blocked_moves", "allowed_moves") and isinstance(value, list):
        return ", ".join(str(m) for m in moves_named([str(v) for v in value], catalog)) or "none"
    if key == "high_risks" and isinstance(value, list):
        parts = []
        for risk in value:
            if isinstance(risk, dict):
                parts.append(
                    f"{risk.get('description', '?')} (severity {risk.get('severity', '?')}, "
                    f"detectability {risk.get('detectability', '?')}, reversibility {risk.get('reversibility', '?')}, "
                    f"priority {risk.get('priority', '?')})"
                )
        return "; ".join(parts)
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def claim_lines(claim: Any, catalog: dict[str, str]) -> list[tuple[str, str]]:
    if not isinstance(claim, dict):
        return [("", json.dumps(claim, ensure_ascii=False))]
    return [(key.replace("_", " ").capitalize(), _claim_value(key, value, catalog)) for key, value in claim.items()]


def conflict_views(conflicts: Iterable[Any], catalog: dict[str, str]) -> list[ConflictView]:
    return [
        ConflictView(
            rule=c.rule,
            rule_label=RULE_LABELS.get(c.rule, c.rule.replace("_", " ")),
            left_agent=AGENT_LABELS.get(c.left_agent, c.left_agent),
            left_claim=claim_lines(c.left_claim, catalog),
            right_agent=AGENT_LABELS.get(c.right_agent, c.right_agent),
            right_claim=claim_lines(c.right_claim, catalog),
            resolution=c.resolution,
        )
        for c in conflicts
    ]


@dataclass
class BriefView:
    strategy: str
    allowed: list[MoveName]
    blocked: list[MoveName]
    escalation: str
    instructions: list[str]
    missing: list[str]
    preferences: list[tuple[str, Any]]


def brief_view(brief: Any, catalog: dict[str, str]) -> BriefView | None:
    if not isinstance(brief, dict):
        return None
    prefs = brief.get("preferences") or {}
    return BriefView(
        strategy=str(brief.get("strategy", "")),
        allowed=moves_named(brief.get("allowed_moves") or [], catalog),
        blocked=moves_named(brief.get("blocked_moves") or [], catalog),
        escalation=str(brief.get("escalation", "none")),
        instructions=[str(i) for i in brief.get("instructions") or []],
        missing=[AGENT_LABELS.get(m, m) for m in brief.get("missing") or []],
        preferences=list(prefs.items()) if isinstance(prefs, dict) else [],
    )


@dataclass
class CriticRound:
    round: int
    passed: bool
    critic_ok: bool
    violations: list[str]


def critic_rounds(critic_result: Any) -> list[CriticRound]:
    """Turn.critic_result ({"round_1": {"passed", "violations", "critic_ok"}, ...}) in round order."""
    if not isinstance(critic_result, dict):
        return []
    rounds = []
    for key, value in critic_result.items():
        if not isinstance(value, dict):
            continue
        digits = "".join(ch for ch in str(key) if ch.isdigit())
        rounds.append(
            CriticRound(
                round=int(digits) if digits else 0,
                passed=bool(value.get("passed")),
                critic_ok=bool(value.get("critic_ok", True)),
                violations=[str(v) for v in value.get("violations") or []],
            )
        )
    return sorted(rounds, key=lambda r: r.round)


def check_reasons(turn: Turn) -> list[str]:
    """What failed on the turn, in a coach's words: each quality finding once (surface, check,
    what was done), then what the critic gate objected to in rounds that did not pass."""
    seen: set[tuple[str, str, str]] = set()
    labels: list[str] = []
    for finding in turn.quality_findings.all():
        key = (finding.surface, finding.check_name, finding.action)
        if key in seen:
            continue
        seen.add(key)
        detail = f" ({finding.detail})" if finding.detail else ""
        labels.append(
            f"{finding.get_surface_display()} failed {finding.check_name.replace('_', ' ')}{detail}: "
            f"{finding.get_action_display().lower()}"
        )
    # A round's violations repeat its quality findings ("check: detail"): only the critic's own.
    recorded = {f"{f.check_name}: {f.detail}" for f in turn.quality_findings.all()}
    for round in critic_rounds(turn.critic_result):
        own = [v for v in round.violations if v not in recorded]
        if not round.passed and own:
            labels.append(f"Critic gate, round {round.round}: " + "; ".join(own))
    return labels
