"""Arbitration is code, not a prompt: it turns the specialists' outputs into one brief.

Rules, in order:
1. `blocked_move_dropped`: a move Plasticity suggests and Stability blocks is dropped.
2. `high_risk_overrides_push`: with a high risk in force, a pushing strategy becomes "support".
3. `escalation_changes_brief`: escalation refer/crisis tells Synth to point to human help.
4. `stability_missing_conservative`: without Stability, only non-pushing moves are allowed.
Each clash becomes a ConflictRecord that the pipeline stores as a Conflict.
"""

from dataclasses import dataclass, field
from typing import Any

from agents.roles.schemas import PUSHING_STRATEGIES, PersonaOutput, PlasticityOutput, ShadowOutput, StabilityOutput

# A risk is high when it could do grave harm, or when its FMEA priority number is in the
# top quarter-ish of the 1-125 scale (e.g. severity 4, detectability 3, reversibility 3).
HIGH_RISK_SEVERITY = 4
HIGH_RISK_PRIORITY = 36
SAFE_STRATEGY = "support"
CRISIS_INSTRUCTION = (
    "The coachee may be in danger. Respond with calm care, encourage them to contact the crisis "
    "resources shown with this reply or local emergency services now, and do nothing else."
)
# After the pre-gate read someone else's crisis in the words (safety/whose.py): the coachee is
# the one who is worried, and may be at risk too.
HELPER_CRISIS_INSTRUCTION = (
    "The coachee is worried about someone else who may be in danger. Respond with calm care to the "
    "coachee as the person who is worried: if anyone is in immediate danger, encourage them to call "
    "local emergency services now; the crisis resources shown with this reply also advise people "
    "worried about someone, and are there for the coachee too. Do nothing else."
)


@dataclass(frozen=True)
class MoveInfo:
    key: str
    name: str
    description: str
    pushes: bool


@dataclass
class ConflictRecord:
    rule: str
    left_agent: str
    left_claim: dict[str, Any]
    right_agent: str
    right_claim: dict[str, Any]
    resolution: str


@dataclass
class Arbitration:
    brief: dict[str, Any]
    conflicts: list[ConflictRecord] = field(default_factory=list)

    @property
    def blocked_moves(self) -> list[str]:
        return list(self.brief["blocked_moves"])

    @property
    def allowed_moves(self) -> list[str]:
        return list(self.brief["allowed_moves"])


def arbitrate(
    *,
    shadow: ShadowOutput | None,
    persona: PersonaOutput | None,
    plasticity: PlasticityOutput | None,
    stability: StabilityOutput | None,
    catalog: dict[str, MoveInfo],
) -> Arbitration:
    conflicts: list[ConflictRecord] = []
    missing = [
        name
        for name, output in (
            ("shadow", shadow),
            ("persona", persona),
            ("plasticity", plasticity),
            ("stability", stability),
        )
        if output is None
    ]
    blocked = set(stability.blocked_moves) if stability else set()
    suggested = list(dict.fromkeys(plasticity.suggested_moves)) if plasticity else []
    strategy = plasticity.strategy if plasticity else SAFE_STRATEGY
    instructions: list[str] = []

    for key in suggested:
        if key in blocked:
            conflicts.append(
                ConflictRecord(
                    rule="blocked_move_dropped",
                    left_agent="plasticity",
                    left_claim={"suggested_move": key, "rationale": plasticity.rationale if plasticity else ""},
                    right_agent="stability",
                    right_claim={"blocked_move": key, "rationale": stability.rationale if stability else ""},
                    resolution=f"Dropped {key}: a move Stability blocks is never used.",
                )
            )
    allowed = [key for key in suggested if key not in blocked]

    high_risks = [
        risk
        for risk in (stability.risks if stability else [])
        if risk.severity >= HIGH_RISK_SEVERITY or risk.priority >= HIGH_RISK_PRIORITY
    ]
    if high_risks and strategy in PUSHING_STRATEGIES:
        conflicts.append(
            ConflictRecord(
                rule="high_risk_overrides_push",
                left_agent="plasticity",
                left_claim={"strategy": strategy},
                right_agent="stability",
                right_claim={"high_risks": [r.model_dump() | {"priority": r.priority} for r in high_risks]},
                resolution=f"Strategy {strategy} replaced by {SAFE_STRATEGY}: a high risk is in force.",
            )
        )
        strategy = SAFE_STRATEGY
    if high_risks:
        # No pressure at all while a high risk is in force, whichever strategy was chosen.
        pushing = [key for key in allowed if key in catalog and catalog[key].pushes]
        blocked |= set(pushing)
        allowed = [key for key in allowed if key not in pushing]

    if stability is None:
        strategy = SAFE_STRATEGY
        pushing = [key for key in allowed if key in catalog and catalog[key].pushes]
        allowed = [key for key in allowed if key not in pushing]
        blocked |= {key for key, move in catalog.items() if move.pushes}
        if pushing:
            conflicts.append(
                ConflictRecord(
                    rule="stability_missing_conservative",
                    left_agent="plasticity",
                    left_claim={"suggested_moves": pushing},
                    right_agent="stability",
                    right_claim={"status": "failed"},
                    resolution="Safety review missing: pushing moves withheld, strategy set to support.",
                )
            )
        instructions.append("The safety review is missing: be gentle, do not push, do not set deadlines.")

    escalation = stability.escalation if stability else "none"
    if escalation in ("refer", "crisis"):
        if strategy in PUSHING_STRATEGIES or (plasticity and plasticity.strategy != SAFE_STRATEGY):
            conflicts.append(
                ConflictRecord(
                    rule="escalation_changes_brief",
                    left_agent="plasticity",
                    left_claim={"strategy": strategy},
                    right_agent="stability",
                    right_claim={"escalation": escalation},
                    resolution=f"Escalation {escalation}: the reply points to human support first.",
                )
            )
        strategy = SAFE_STRATEGY
        if escalation == "crisis":
            instructions.append(CRISIS_INSTRUCTION)
            allowed = []
        else:
            instructions.append(
                "Gently suggest talking to a qualified professional about what weighs on them, alongside coaching."
            )

    return Arbitration(
        brief={
            "strategy": strategy,
            "allowed_moves": allowed,
            "blocked_moves": sorted(blocked),
            "escalation": escalation,
            "risks": [r.model_dump() | {"priority": r.priority} for r in (stability.risks if stability else [])],
            "preferences": plasticity.preferences.model_dump() if plasticity else None,
            "instructions": instructions,
            "missing": missing,
        },
        conflicts=conflicts,
    )


def arbitrate_crisis(result: Arbitration, *, someone_else: bool = False) -> Arbitration:
    """The crisis brief, after the pre-gate recognised crisis language: no moves, human help first
    (to a helper, where the words told someone else's crisis).

    Recorded on the turn (escalation and flag), not as a Conflict: the pre-gate is not an agent.
    """
    brief = dict(result.brief)
    brief.update(
        strategy=SAFE_STRATEGY,
        allowed_moves=[],
        escalation="crisis",
        instructions=[*brief["instructions"], HELPER_CRISIS_INSTRUCTION if someone_else else CRISIS_INSTRUCTION],
    )
    return Arbitration(brief=brief, conflicts=result.conflicts)


def render_brief(brief: dict[str, Any], catalog: dict[str, MoveInfo]) -> str:
    """The brief as plain text for Synth's prompt."""

    def names(keys: list[str]) -> str:
        return ", ".join(f"{key} ({catalog[key].name})" if key in catalog else key for key in keys) or "none"

    lines = [
        f"Strategy: {brief['strategy']}",
        f"Allowed moves: {names(brief['allowed_moves'])}",
        f"Blocked moves (never use): {names(brief['blocked_moves'])}",
        f"Escalation: {brief['escalation']}",
    ]
    if brief.get("preferences"):
        prefs = ", ".join(f"{k} {v}/5" for k, v in brief["preferences"].items())
        lines.append(f"Speak with: {prefs}")
    if brief["risks"]:
        lines.append("Risks: " + "; ".join(f"{r['description']} (priority {r['priority']})" for r in brief["risks"]))
    if brief["missing"]:
        lines.append(f"Missing signals: {', '.join(brief['missing'])}")
    lines += brief["instructions"]
    return "\n".join(lines)
