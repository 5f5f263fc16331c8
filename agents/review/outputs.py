"""Each agent's stored output rendered for people: one view per agent (Shadow ... Critic), the
risks as rows, and the agent's own part of its prompt as it was sent."""

from __future__ import annotations

import json
from dataclasses import dataclass

from pydantic import ValidationError

from agents.models import AgentRun
from agents.pipeline.runner import instructions_for
from agents.rendering import markdown_to_safe_html
from agents.review.charts import OceanChart, format_ms, ocean_chart
from agents.review.labels import MoveName, moves_named, run_label
from agents.roles.arbitration import HIGH_RISK_PRIORITY, HIGH_RISK_SEVERITY
from agents.roles.schemas import (
    OUTPUT_SCHEMAS,
    AgentOutput,
    CriticOutput,
    PersonaOutput,
    PlasticityOutput,
    ShadowOutput,
    StabilityOutput,
    SynthOutput,
)

UNSAFE_LABELS = {
    "method_or_means": "Method or means of self-harm",
    "diagnosis": "A diagnosis",
    "medication_advice": "Medication advice",
    "claims_to_be_human": "Claims to be human",
}
PREFERENCE_HINTS = {
    "directness": ("gentle", "blunt"),
    "warmth": ("cool", "warm"),
    "structure": ("free-flowing", "steps and lists"),
    "challenge": ("easy", "challenging"),
    "pacing": ("slow", "fast"),
}


def pips(value: int, of: int = 5) -> list[bool]:
    return [i < value for i in range(of)]


@dataclass
class EvidenceItem:
    text: str
    refs: list[str]


@dataclass
class ShadowView:
    goals: list[EvidenceItem]
    priorities: list[EvidenceItem]
    commitment: str
    probability_pct: int
    horizon_days: int
    rationale: str
    pattern: str
    pattern_confidence_pct: int


@dataclass
class PersonaView:
    chart: OceanChart
    recurring_goals: list[str]
    follow_through: list[tuple[str, int]]
    growth_edges: list[str]


@dataclass
class Preference:
    label: str
    value: int
    low: str
    high: str
    pips: list[bool]


@dataclass
class PlasticityView:
    preferences: list[Preference]
    strategy: str
    moves: list[MoveName]
    rationale: str


@dataclass
class RiskRow:
    description: str
    severity: int
    detectability: int
    reversibility: int
    priority: int
    high: bool
    severity_pips: list[bool]
    detectability_pips: list[bool]
    reversibility_pips: list[bool]


@dataclass
class StabilityView:
    risks: list[RiskRow]
    blocked: list[MoveName]
    escalation: str
    rationale: str


@dataclass
class SynthView:
    reply_html: str  # Markdown rendered and sanitised by agents.rendering
    moves: list[MoveName]
    signals_used: list[str]
    signals_missing: list[str]


@dataclass
class CriticView:
    violated: list[MoveName]
    unsafe: list[str]
    explanation: str


@dataclass
class AgentOutputView:
    run_id: int
    agent: str
    label: str
    round: int
    status: str
    status_label: str
    latency: str
    prompt_tokens: int | None
    completion_tokens: int | None
    attempts: int
    error: str
    validation_errors: list[str]
    invalid: str = ""
    raw_json: str = ""
    shadow: ShadowView | None = None
    persona: PersonaView | None = None
    plasticity: PlasticityView | None = None
    stability: StabilityView | None = None
    synth: SynthView | None = None
    critic: CriticView | None = None
    prompt: str = ""  # the agent's own part of what it was sent; "" when not kept (retention)


def risk_rows(stability: StabilityOutput) -> list[RiskRow]:
    rows = [
        RiskRow(
            description=risk.description,
            severity=risk.severity,
            detectability=risk.detectability,
            reversibility=risk.reversibility,
            priority=risk.priority,
            high=risk.severity >= HIGH_RISK_SEVERITY or risk.priority >= HIGH_RISK_PRIORITY,
            severity_pips=pips(risk.severity),
            detectability_pips=pips(risk.detectability),
            reversibility_pips=pips(risk.reversibility),
        )
        for risk in stability.risks
    ]
    return sorted(rows, key=lambda r: r.priority, reverse=True)


def _fill_view(view: AgentOutputView, output: AgentOutput, catalog: dict[str, str], seq: dict[int, int]) -> None:
    def refs(ids: list[int]) -> list[str]:
        return [f"#{seq.get(i, i)}" for i in ids]

    if isinstance(output, ShadowOutput):
        view.shadow = ShadowView(
            goals=[EvidenceItem(g.text, refs(g.evidence)) for g in output.stated_goals],
            priorities=[EvidenceItem(p.text, refs(p.evidence)) for p in output.revealed_priorities],
            commitment=output.follow_through.commitment,
            probability_pct=output.follow_through.probability_pct,
            horizon_days=output.follow_through.horizon_days,
            rationale=output.follow_through.rationale,
            pattern=output.pattern_class.replace("_", " "),
            pattern_confidence_pct=output.pattern_confidence_pct,
        )
    elif isinstance(output, PersonaOutput):
        view.persona = PersonaView(
            chart=ocean_chart(output, seq),
            recurring_goals=list(output.recurring_goals),
            follow_through=[(f.goal, f.percent) for f in output.follow_through],
            growth_edges=list(output.growth_edges),
        )
    elif isinstance(output, PlasticityOutput):
        prefs = output.preferences.model_dump()
        view.plasticity = PlasticityView(
            preferences=[
                Preference(key.capitalize(), value, *PREFERENCE_HINTS.get(key, ("low", "high")), pips(value))
                for key, value in prefs.items()
            ],
            strategy=output.strategy,
            moves=moves_named(output.suggested_moves, catalog),
            rationale=output.rationale,
        )
    elif isinstance(output, StabilityOutput):
        view.stability = StabilityView(
            risks=risk_rows(output),
            blocked=moves_named(output.blocked_moves, catalog),
            escalation=output.escalation,
            rationale=output.rationale,
        )
    elif isinstance(output, SynthOutput):
        view.synth = SynthView(
            reply_html=markdown_to_safe_html(output.reply),
            moves=moves_named(output.moves_used, catalog),
            signals_used=list(output.signals_used),
            signals_missing=list(output.signals_missing),
        )
    elif isinstance(output, CriticOutput):
        view.critic = CriticView(
            violated=moves_named(output.violated_moves, catalog),
            unsafe=[UNSAFE_LABELS.get(u, u) for u in output.unsafe_content],
            explanation=output.explanation,
        )


def parse_output(run: AgentRun) -> AgentOutput | None:
    """The run's parsed output through its schema; None when there is none or it does not fit."""
    schema = OUTPUT_SCHEMAS.get(run.agent)
    if schema is None or run.parsed_output is None:
        return None
    try:
        return schema.model_validate(run.parsed_output)
    except ValidationError:
        return None


def run_prompt(run: AgentRun) -> str:
    """The agent's own part of what it was sent (after the turn's shared part), rebuilt from what
    the run stored: its prompt version filled with the run's values, then the turn's additions.
    "" once the stored inputs are pruned (COACHING_RAW_RETENTION_DAYS) or were never kept."""
    if run.prompt_version is None or not (run.prompt_values or run.extra_instructions):
        return ""
    return instructions_for(run.prompt_version.body, run.prompt_values, run.extra_instructions)


def agent_output_view(run: AgentRun, catalog: dict[str, str], seq_by_id: dict[int, int]) -> AgentOutputView:
    view = AgentOutputView(
        run_id=run.pk,
        agent=run.agent,
        label=run_label(run),
        round=run.round,
        status=run.status,
        status_label=run.get_status_display(),
        latency=format_ms(run.latency_ms),
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
        attempts=run.attempts,
        error=run.error,
        validation_errors=[str(e) for e in (run.validation_errors or [])],
        prompt=run_prompt(run),
    )
    schema = OUTPUT_SCHEMAS.get(run.agent)
    if schema is None or run.parsed_output is None:
        return view
    try:
        output = schema.model_validate(run.parsed_output)
    except ValidationError as exc:
        view.invalid = f"The stored output does not fit the {run.agent} schema ({exc.error_count()} errors)."
        view.raw_json = json.dumps(run.parsed_output, indent=2, ensure_ascii=False)[:4000]
        return view
    _fill_view(view, output, catalog, seq_by_id)
    return view
