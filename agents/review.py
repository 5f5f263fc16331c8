"""Read models for the coach's review pages: a session's transcript with every agent's output
rendered for people, a timeline chart per turn, a coachee's overview (OCEAN over sessions,
follow-through predictions, the blackboard's history) and the review queue.

Plain functions over the ORM, no other I/O. They do not decide who may see what: the admin
hands them objects and querysets it has already scoped (agents/admin/scoping.py). Chart
geometry is computed here and the templates only place it, so the SVG is server-rendered
with no JavaScript; coordinates are preformatted strings so no locale can change them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Exists, Max, OuterRef, Prefetch, Q, QuerySet
from django.utils import timezone
from pydantic import ValidationError

from agents.memory import predictions
from agents.models import (
    Agent,
    AgentRun,
    Annotation,
    AnswerFeedback,
    BlackboardVersion,
    CoachingMove,
    CoachingSession,
    Escalation,
    Message,
    QualityFinding,
    Role,
    RunStatus,
    Turn,
)
from agents.pipeline.steps import instructions_for
from agents.rendering import markdown_to_safe_html
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
from agents.selectors import turn_number

AGENT_ORDER = [a.value for a in Agent]
AGENT_LABELS: dict[str, str] = {a.value: str(a.label) for a in Agent}
TRAITS = [
    ("openness", "Openness"),
    ("conscientiousness", "Conscientiousness"),
    ("extraversion", "Extraversion"),
    ("agreeableness", "Agreeableness"),
    ("neuroticism", "Neuroticism"),
]
RULE_LABELS = {
    "blocked_move_dropped": "A move Stability blocks is dropped",
    "high_risk_overrides_push": "A high risk overrides a pushing strategy",
    "escalation_changes_brief": "Escalation changes the brief",
    "stability_missing_conservative": "Stability missing: conservative brief",
}
ESCALATION_NOTES = {
    "monitor": "Stability asked to keep an eye on this coachee.",
    "refer": "The reply pointed the coachee to professional help.",
    "crisis": "Crisis: the coachee was shown crisis resources and a calm reply.",
}
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
QUEUE_REASONS = {
    "escalated": "Escalated",
    "checks": "Failed a check",
    "feedback": "Thumbs down",
    "degraded": "Degraded",
    "flagged": "Flagged",
}
EXCERPT_CHARS = 140


def _n(value: float) -> str:
    """A coordinate for SVG: at most one decimal, never a locale's comma."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def pips(value: int, of: int = 5) -> list[bool]:
    return [i < value for i in range(of)]


# --- Moves ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MoveName:
    key: str
    name: str
    known: bool

    def __str__(self) -> str:
        return self.name if self.known else self.key


def move_catalog() -> dict[str, str]:
    """Every move's key → name, inactive ones included (old turns used them)."""
    return dict(CoachingMove.objects.values_list("key", "name"))


def moves_named(keys: Iterable[str], catalog: dict[str, str]) -> list[MoveName]:
    return [MoveName(key, catalog.get(key, key), key in catalog) for key in keys]


# --- Charts ---------------------------------------------------------------------------


@dataclass
class Tick:
    x: str
    label: str


@dataclass
class TraitBar:
    key: str
    label: str
    score: int
    uncertainty: int
    low: int
    high: int
    evidence: list[str]
    label_y: str
    bar_y: str
    band_x: str
    band_w: str
    score_x: str
    marker_y: str


@dataclass
class OceanChart:
    rows: list[TraitBar]
    width: int
    height: int
    track_x: int
    track_w: int
    bar_h: int
    marker_h: int
    value_x: int
    ticks: list[Tick]
    grid_top: int
    grid_bottom: int
    tick_y: int

    @property
    def summary(self) -> str:
        return "; ".join(f"{r.label} {r.score} ± {r.uncertainty}" for r in self.rows)


OCEAN_TRACK_X = 150
OCEAN_TRACK_W = 300
OCEAN_ROW_H = 28


def ocean_chart(persona: PersonaOutput, seq_by_id: dict[int, int] | None = None) -> OceanChart:
    """Five bars, 0-100: the score as a marker and score ± uncertainty as a shaded band."""
    seq_by_id = seq_by_id or {}
    top = 8
    rows = []
    for index, (key, label) in enumerate(TRAITS):
        trait = getattr(persona.ocean, key)
        low, high = trait.band
        bar_y = top + index * OCEAN_ROW_H + 6
        rows.append(
            TraitBar(
                key=key,
                label=label,
                score=trait.score,
                uncertainty=trait.uncertainty,
                low=low,
                high=high,
                evidence=[f"#{seq_by_id.get(ref, ref)}" for ref in trait.evidence],
                label_y=_n(bar_y + 11),
                bar_y=_n(bar_y),
                band_x=_n(OCEAN_TRACK_X + low * OCEAN_TRACK_W / 100),
                band_w=_n(max(2.0, (high - low) * OCEAN_TRACK_W / 100)),
                score_x=_n(OCEAN_TRACK_X + trait.score * OCEAN_TRACK_W / 100 - 1.5),
                marker_y=_n(bar_y - 4),
            )
        )
    grid_bottom = top + len(TRAITS) * OCEAN_ROW_H + 4
    ticks = [Tick(_n(OCEAN_TRACK_X + v * OCEAN_TRACK_W / 100), str(v)) for v in (0, 25, 50, 75, 100)]
    return OceanChart(
        rows=rows,
        width=OCEAN_TRACK_X + OCEAN_TRACK_W + 90,
        height=grid_bottom + 18,
        track_x=OCEAN_TRACK_X,
        track_w=OCEAN_TRACK_W,
        bar_h=14,
        marker_h=22,
        value_x=OCEAN_TRACK_X + OCEAN_TRACK_W + 10,
        ticks=ticks,
        grid_top=top,
        grid_bottom=grid_bottom,
        tick_y=grid_bottom + 13,
    )


@dataclass
class TimelineBar:
    agent: str
    label: str
    round: int
    status: str
    start_ms: int
    duration_ms: int
    prompt_tokens: int | None
    completion_tokens: int | None
    title: str
    label_y: str
    bar_y: str
    x: str
    width: str
    text_x: str
    text_anchor: str
    text_class: str
    duration_text: str
    tok_y: str
    tok_prompt_w: str
    tok_completion_x: str
    tok_completion_w: str
    tok_text_x: str
    tok_text: str


@dataclass
class TimelineMarker:
    x: str
    label: str
    label_x: str


@dataclass
class Timeline:
    bars: list[TimelineBar]
    width: int
    height: int
    plot_x: int
    plot_w: int
    plot_end: int
    label_x: int
    tokens_x: int
    rows_top: int
    rows_bottom: int
    axis_y: int
    tick_y: int
    header_y: int
    ticks: list[Tick]
    markers: list[TimelineMarker]
    total_ms: int
    total_tokens: int
    legend: list[tuple[str, str]]

    @property
    def summary(self) -> str:
        return f"{len(self.bars)} agent runs over {format_ms(self.total_ms)}, {self.total_tokens} tokens in all"


TL_LABEL_W = 130
TL_PLOT_W = 440
TL_GAP = 24
TL_TOKENS_W = 100
TL_WIDTH = TL_LABEL_W + TL_PLOT_W + TL_GAP + TL_TOKENS_W + 80
TL_ROW_H = 26
TL_BAR_H = 14
TL_TOP = 26
NICE_STEPS_MS = [50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10_000, 15_000, 20_000, 30_000, 60_000, 120_000]


def format_ms(ms: int | None) -> str:
    if ms is None:
        return "n/a"
    if ms < 1000:
        return f"{ms} ms"
    seconds = ms / 1000
    return f"{seconds:.1f} s" if seconds < 60 else f"{int(seconds // 60)} min {int(seconds % 60)} s"


def _tick_step(total_ms: int) -> int:
    for step in NICE_STEPS_MS:
        if total_ms / step <= 6:
            return step
    return 300_000


def _tick_label(ms: int) -> str:
    return f"{ms / 1000:g} s"


def _run_sort_key(run: AgentRun) -> tuple[datetime, int, int]:
    order = AGENT_ORDER.index(run.agent) if run.agent in AGENT_ORDER else len(AGENT_ORDER)
    return (run.started_at, order, run.round)


def run_label(run: AgentRun) -> str:
    label = AGENT_LABELS.get(run.agent, run.agent)
    return f"{label} (round {run.round})" if run.round > 1 else label


def _run_duration_ms(run: AgentRun, end: datetime) -> int:
    if run.latency_ms is not None:
        return int(run.latency_ms)
    stop = run.finished_at or end
    return max(0, int((stop - run.started_at).total_seconds() * 1000))


def timeline(turn: Turn, runs: Sequence[AgentRun]) -> Timeline:
    """A Gantt chart of the turn: one row per agent run, from when it started (after the
    coachee's message) for as long as it took, and its tokens as a stacked bar beside it."""
    ordered = sorted(runs, key=_run_sort_key)
    t0 = turn.started_at
    now = timezone.now()
    ends = [run.finished_at for run in ordered if run.finished_at] + [turn.finished_at, turn.coach_done_at]
    latest_end = max([e for e in ends if e is not None], default=None) or now
    spans: list[tuple[AgentRun, int, int]] = []
    for run in ordered:
        start = max(0, int((run.started_at - t0).total_seconds() * 1000))
        spans.append((run, start, _run_duration_ms(run, latest_end)))
    finished_ms = int((turn.finished_at - t0).total_seconds() * 1000) if turn.finished_at else None
    total_ms = max([start + duration for _, start, duration in spans] + [finished_ms or 0, 1])
    step = _tick_step(total_ms)
    total_ms = max(total_ms, step)  # at least one tick's width
    scale_end = ((total_ms + step - 1) // step) * step
    max_tokens = max([(r.prompt_tokens or 0) + (r.completion_tokens or 0) for r in ordered] + [1])

    plot_x, plot_end = TL_LABEL_W, TL_LABEL_W + TL_PLOT_W
    tokens_x = plot_end + TL_GAP

    def at(ms: int) -> float:
        return plot_x + ms * TL_PLOT_W / scale_end

    bars = []
    for index, (run, start, duration) in enumerate(spans):
        row_top = TL_TOP + index * TL_ROW_H
        bar_y = row_top + (TL_ROW_H - TL_BAR_H) / 2
        x = at(start)
        width = max(2.0, at(start + duration) - x)
        duration_text = format_ms(duration) + (" (running)" if run.status == RunStatus.RUNNING else "")
        if x + width + 8 + 7 * len(duration_text) <= plot_end:
            text_x, anchor, text_class = x + width + 5, "start", "outside"
        elif x - 8 - 7 * len(duration_text) >= plot_x:
            text_x, anchor, text_class = x - 5, "end", "outside"
        else:
            text_x, anchor, text_class = x + width - 5, "end", "inside"
        prompt, completion = run.prompt_tokens, run.completion_tokens
        prompt_w = (prompt or 0) * TL_TOKENS_W / max_tokens
        completion_w = (completion or 0) * TL_TOKENS_W / max_tokens
        tokens_known = prompt is not None or completion is not None
        tok_text = f"{prompt or 0} + {completion or 0}" if tokens_known else "no tokens"
        title = (
            f"{run_label(run)}: {run.get_status_display().lower()}, started {format_ms(start)} after the message, "
            f"took {format_ms(duration)}; "
            + (f"{prompt or 0} prompt + {completion or 0} completion tokens" if tokens_known else "no token counts")
            + (f"; error: {excerpt(run.error, 160)}" if run.error else "")
        )
        bars.append(
            TimelineBar(
                agent=run.agent,
                label=run_label(run),
                round=run.round,
                status=run.status,
                start_ms=start,
                duration_ms=duration,
                prompt_tokens=prompt,
                completion_tokens=completion,
                title=title,
                label_y=_n(bar_y + 11),
                bar_y=_n(bar_y),
                x=_n(x),
                width=_n(width),
                text_x=_n(text_x),
                text_anchor=anchor,
                text_class=text_class,
                duration_text=duration_text,
                tok_y=_n(bar_y),
                tok_prompt_w=_n(prompt_w),
                tok_completion_x=_n(tokens_x + prompt_w),
                tok_completion_w=_n(completion_w),
                tok_text_x=_n(tokens_x + prompt_w + completion_w + 5),
                tok_text=tok_text,
            )
        )
    rows_bottom = TL_TOP + max(1, len(bars)) * TL_ROW_H
    ticks = [Tick(_n(at(ms)), _tick_label(ms)) for ms in range(0, scale_end + 1, step)]
    markers = []
    if finished_ms is not None:
        x = at(finished_ms)
        markers.append(TimelineMarker(_n(x), "answer delivered", _n(x - 4)))
    return Timeline(
        bars=bars,
        width=TL_WIDTH,
        height=rows_bottom + 30,
        plot_x=plot_x,
        plot_w=TL_PLOT_W,
        plot_end=plot_end,
        label_x=plot_x - 8,
        tokens_x=tokens_x,
        rows_top=TL_TOP - 4,
        rows_bottom=rows_bottom,
        axis_y=rows_bottom + 2,
        tick_y=rows_bottom + 17,
        header_y=14,
        ticks=ticks,
        markers=markers,
        total_ms=total_ms,
        total_tokens=sum((r.prompt_tokens or 0) + (r.completion_tokens or 0) for r in ordered),
        legend=[(agent, AGENT_LABELS.get(agent, agent)) for agent in dict.fromkeys(r.agent for r in ordered)],
    )


# --- Agent outputs, for people --------------------------------------------------------


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


# --- Arbitration, critic, failures ------------------------------------------------------


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


@dataclass
class FailureView:
    label: str
    error: str
    validation_errors: list[str]
    attempts: int
    latency: str


# --- The session review -------------------------------------------------------------


@dataclass
class TurnReview:
    turn: Turn
    number: int
    user_message: Message
    coach_message: Message | None
    synth_message: Message | None
    synth_html: str
    escalation_note: str
    crisis_signal: str  # which pre-gate layer fired and why, for the coach; "" when none
    outputs: list[AgentOutputView]
    timeline: Timeline
    conflicts: list[ConflictView]
    brief: BriefView | None
    critic: list[CriticRound]
    failures: list[FailureView]
    missing: list[str]
    annotations: list[Annotation]
    coach_flagged: bool
    open: bool
    checks_failed: list[str] = field(default_factory=list)  # check_reasons: quality findings, critic objections
    feedback: AnswerFeedback | None = None  # the coachee's thumbs on the full answer

    @property
    def needs_review(self) -> bool:
        t = self.turn
        thumbs_down = self.feedback is not None and self.feedback.rating == AnswerFeedback.Rating.DOWN
        return (
            t.escalation != Escalation.NONE
            or t.degraded
            or t.flagged
            or self.coach_flagged
            or bool(self.checks_failed)
            or thumbs_down
        )

    @property
    def critic_passed(self) -> bool | None:
        return self.critic[-1].passed if self.critic else None


@dataclass
class TranscriptEntry:
    turn: TurnReview | None = None
    message: Message | None = None


@dataclass
class SessionReview:
    session: CoachingSession
    entries: list[TranscriptEntry]
    turns: list[TurnReview]
    escalated: int = 0
    degraded: int = 0
    flagged: int = 0
    checks_failed: int = 0
    thumbs_down: int = 0
    runs: int = 0
    tokens: int = 0


def _turns_with_everything(turns: QuerySet[Turn]) -> QuerySet[Turn]:
    return turns.select_related("user_message", "coach_message", "synth_message").prefetch_related(
        Prefetch("agent_runs", queryset=AgentRun.objects.select_related("prompt_version").order_by("started_at", "pk")),
        "conflicts",
        Prefetch("annotations", queryset=Annotation.objects.select_related("author").order_by("created_at", "pk")),
        Prefetch("quality_findings", queryset=QualityFinding.objects.order_by("round", "pk")),
        "feedback",
    )


CRISIS_CATEGORY_LABELS = {
    "suicide": "suicidal thoughts or plans",
    "self_harm": "self-harm",
    "means": "a question about means or method",
    "eating": "not eating or drinking",
    "abuse": "abuse or danger at home",
}


def crisis_signal_text(signal: dict[str, Any] | None) -> str:
    """What the crisis pre-gate recorded on a turn, as a coach reads it."""
    if not signal:
        return ""
    category = CRISIS_CATEGORY_LABELS.get(str(signal.get("category")), str(signal.get("category")))
    if signal.get("layer") == "pattern":
        why = f"pattern #{signal.get('pattern_id')} ({signal.get('locale')}): {signal.get('pattern')}"
    else:
        features = ", ".join(f"“{f}”" for f in signal.get("features", []))
        why = f"classifier, score {signal.get('score')}; strongest n-grams {features or 'none'}"
        if "meaning" in signal:  # the sentence embedding's share, in log-odds (older turns lack it)
            why += f"; the message's meaning weighed {signal['meaning']:+}"
        if signal.get("context"):
            why += f"; distress earlier in the session {signal.get('context')}"
    level = signal.get("level", "")
    return f"Crisis pre-gate ({level}): {category}, by {why}"


def turn_review(
    turn: Turn, number: int, catalog: dict[str, str], seq_by_id: dict[int, int], *, open: bool = False
) -> TurnReview:
    runs = list(turn.agent_runs.all())
    annotations = list(turn.annotations.all())
    brief = brief_view(turn.brief, catalog)
    failures = [
        FailureView(
            label=run_label(run),
            error=run.error,
            validation_errors=[str(e) for e in (run.validation_errors or [])],
            attempts=run.attempts,
            latency=format_ms(run.latency_ms),
        )
        for run in sorted(runs, key=_run_sort_key)
        if run.status == RunStatus.FAILED
    ]
    critic = critic_rounds(turn.critic_result)
    missing = list(brief.missing) if brief else []
    if critic and any(not r.critic_ok for r in critic) and "Critic" not in missing:
        missing.append("Critic")
    synth = turn.synth_message
    return TurnReview(
        turn=turn,
        number=number,
        user_message=turn.user_message,
        coach_message=turn.coach_message,
        synth_message=synth,
        synth_html=markdown_to_safe_html(synth.text) if synth and synth.text else "",
        escalation_note=ESCALATION_NOTES.get(turn.escalation, ""),
        crisis_signal=crisis_signal_text(turn.crisis_signal),
        outputs=[agent_output_view(run, catalog, seq_by_id) for run in sorted(runs, key=_run_sort_key)],
        timeline=timeline(turn, runs),
        conflicts=conflict_views(turn.conflicts.all(), catalog),
        brief=brief,
        critic=critic,
        failures=failures,
        missing=missing,
        annotations=annotations,
        coach_flagged=any(a.flagged for a in annotations),
        open=open,
        checks_failed=check_reasons(turn),
        feedback=next(iter(turn.feedback.all()), None),
    )


def session_review(session: CoachingSession, *, open_turn_id: int | None = None) -> SessionReview:
    """The transcript in order, each coachee message with its turn: replies, agents,
    arbitration, the critic gate, failures, a timeline and the coaches' annotations."""
    messages = list(Message.objects.filter(session=session).order_by("seq"))
    seq_by_id = {m.pk: m.seq for m in messages}
    catalog = move_catalog()
    turns = list(_turns_with_everything(Turn.objects.filter(session=session)).order_by("started_at", "pk"))
    reviews: dict[int, TurnReview] = {}
    for number, turn in enumerate(turns, start=1):
        reviews[turn.user_message_id] = turn_review(turn, number, catalog, seq_by_id, open=turn.pk == open_turn_id)
    attached = {t.coach_message_id for t in turns} | {t.synth_message_id for t in turns}
    entries: list[TranscriptEntry] = []
    for message in messages:
        if message.pk in reviews:
            entries.append(TranscriptEntry(turn=reviews[message.pk]))
        elif message.pk not in attached:
            entries.append(TranscriptEntry(message=message))
    ordered = list(reviews.values())
    return SessionReview(
        session=session,
        entries=entries,
        turns=ordered,
        escalated=sum(1 for r in ordered if r.turn.escalation != Escalation.NONE),
        degraded=sum(1 for r in ordered if r.turn.degraded),
        flagged=sum(1 for r in ordered if r.turn.flagged or r.coach_flagged),
        checks_failed=sum(1 for r in ordered if r.checks_failed),
        thumbs_down=sum(1 for r in ordered if r.feedback and r.feedback.rating == AnswerFeedback.Rating.DOWN),
        runs=sum(len(r.outputs) for r in ordered),
        tokens=sum(r.timeline.total_tokens for r in ordered),
    )


# --- The review queue -----------------------------------------------------------------


def review_queue(turns: QuerySet[Turn], reason: str | None = None) -> QuerySet[Turn]:
    """Turns a coach should look at, found by themselves: escalated; failed a quality check or
    the critic gate (in any round, even when the retry passed); a thumbs-down from the coachee;
    degraded; flagged by the pipeline or a coach. Oldest first. `turns` must already be scoped
    to what the coach may see."""
    coach_flagged = Exists(Annotation.objects.filter(turn=OuterRef("pk"), flagged=True))
    quality_failed = Exists(QualityFinding.objects.filter(turn=OuterRef("pk")))
    thumbs_down = Exists(AnswerFeedback.objects.filter(turn=OuterRef("pk"), rating=AnswerFeedback.Rating.DOWN))
    conditions = {
        "escalated": ~Q(escalation=Escalation.NONE),
        "checks": Q(quality_failed=True)
        | Q(critic_result__round_1__passed=False)
        | Q(critic_result__round_2__passed=False),
        "feedback": Q(thumbs_down=True),
        "degraded": Q(degraded=True),
        "flagged": Q(flagged=True) | Q(coach_flagged=True),
    }
    if reason in conditions:
        condition = conditions[reason]
    else:
        condition = Q()
        for each in conditions.values():
            condition |= each
    return (
        turns.annotate(
            coach_flagged=coach_flagged,
            quality_failed=quality_failed,
            thumbs_down=thumbs_down,
            annotation_count=Count("annotations", distinct=True),
            number=turn_number(),
        )
        .filter(condition)
        .select_related("session__coachee", "user_message")
        .prefetch_related(
            Prefetch("quality_findings", queryset=QualityFinding.objects.order_by("round", "pk")),
            Prefetch("feedback", queryset=AnswerFeedback.objects.filter(rating=AnswerFeedback.Rating.DOWN)),
        )
        .order_by("started_at", "pk")
    )


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


@dataclass
class QueueRow:
    turn: Turn
    reasons: list[tuple[str, str]]
    first_words: str
    annotation_count: int
    waiting: timedelta


def queue_rows(turns: Iterable[Turn]) -> list[QueueRow]:
    now = timezone.now()
    rows = []
    for turn in turns:
        reasons: list[tuple[str, str]] = []
        if turn.escalation != Escalation.NONE:
            reasons.append((f"escalation-{turn.escalation}", f"Escalation: {turn.get_escalation_display()}"))
        if turn.degraded:
            missing = (turn.brief or {}).get("missing") if isinstance(turn.brief, dict) else None
            label = "Degraded" + (f": {', '.join(AGENT_LABELS.get(m, m) for m in missing)} missing" if missing else "")
            reasons.append(("degraded", label))
        if turn.flagged:
            reasons.append(("flagged", f"Flagged: {turn.flag_reason}" if turn.flag_reason else "Flagged"))
        if getattr(turn, "coach_flagged", False):
            reasons.append(("coach-flagged", "Flagged by a coach"))
        reasons += [("check-failed", label) for label in check_reasons(turn)]
        for feedback in turn.feedback.all():
            said = f": “{feedback.comment}”" if feedback.comment else ""
            reasons.append(("thumbs-down", f"Thumbs down from the coachee{said}"))
        rows.append(
            QueueRow(
                turn=turn,
                reasons=reasons,
                first_words=excerpt(turn.user_message.text, 120),
                annotation_count=int(getattr(turn, "annotation_count", 0) or 0),
                waiting=now - turn.started_at,
            )
        )
    return rows


# --- The coachee overview -------------------------------------------------------------


@dataclass
class TrendPoint:
    x: str
    y: str
    score: int
    uncertainty: int
    label: str
    err_top: str
    err_bottom: str


@dataclass
class OceanTrend:
    key: str
    label: str
    points: list[TrendPoint]
    line: str
    band: str
    width: int
    height: int
    plot_left: int
    plot_right: int
    y_ticks: list[tuple[str, str]]
    x_labels: list[Tick]
    label_y: int

    @property
    def latest(self) -> TrendPoint | None:
        return self.points[-1] if self.points else None


TREND_W, TREND_H = 280, 150
TREND_LEFT, TREND_RIGHT, TREND_TOP, TREND_BOTTOM = 34, 268, 10, 116


def _trend_y(score: float) -> float:
    return TREND_BOTTOM - score * (TREND_BOTTOM - TREND_TOP) / 100


def ocean_trends(readings: list[tuple[CoachingSession, PersonaOutput]]) -> list[OceanTrend]:
    """Per trait: the score over sessions as a line, score ± uncertainty as a band."""
    count = len(readings)

    def x_of(i: int) -> float:
        if count == 1:
            return (TREND_LEFT + TREND_RIGHT) / 2
        return TREND_LEFT + 12 + i * (TREND_RIGHT - TREND_LEFT - 24) / (count - 1)

    x_labels = [
        Tick(_n(x_of(i)), f"S{session.pk}")
        for i, (session, _) in enumerate(readings)
        if count <= 8 or i in (0, count - 1) or i % max(1, count // 6) == 0
    ]
    trends = []
    for key, label in TRAITS:
        points = []
        upper, lower = [], []
        for i, (session, persona) in enumerate(readings):
            trait = getattr(persona.ocean, key)
            low, high = trait.band
            x = x_of(i)
            points.append(
                TrendPoint(
                    x=_n(x),
                    y=_n(_trend_y(trait.score)),
                    score=trait.score,
                    uncertainty=trait.uncertainty,
                    label=f"Session {session.pk} ({session.created_at:%d %b %Y}): {trait.score} ± {trait.uncertainty}",
                    err_top=_n(_trend_y(high)),
                    err_bottom=_n(_trend_y(low)),
                )
            )
            upper.append(f"{_n(x)},{_n(_trend_y(high))}")
            lower.append(f"{_n(x)},{_n(_trend_y(low))}")
        trends.append(
            OceanTrend(
                key=key,
                label=label,
                points=points,
                line=" ".join(f"{p.x},{p.y}" for p in points),
                band=" ".join(upper + list(reversed(lower))) if count > 1 else "",
                width=TREND_W,
                height=TREND_H,
                plot_left=TREND_LEFT,
                plot_right=TREND_RIGHT,
                y_ticks=[(_n(_trend_y(v)), str(v)) for v in (0, 50, 100)],
                x_labels=x_labels,
                label_y=TREND_BOTTOM + 16,
            )
        )
    return trends


@dataclass
class LaterMessage:
    when: datetime
    session_id: int
    text: str


@dataclass
class PredictionView:
    commitment: str
    probability_pct: int
    horizon_days: int
    rationale: str
    made_at: datetime
    due_at: datetime
    session_id: int
    turn_id: int
    window_open: bool
    status: str
    turn_number: int | None = None  # in its session, as the session review numbers it
    session_started: datetime | None = None
    later_messages: list[LaterMessage] = field(default_factory=list)
    later_follow_through: list[tuple[str, int]] = field(default_factory=list)
    next_pattern: str = ""


@dataclass
class BlackboardItem:
    kind: str
    text: str
    hidden: bool
    status: str


@dataclass
class VersionView:
    version: BlackboardVersion
    is_latest: bool
    source: str
    source_turn_id: int | None
    source_session_id: int | None
    revert_of: int | None
    counts: list[str]  # "2 goals", "1 priority"
    changes: list[str]
    more_changes: int
    items: list[BlackboardItem]


@dataclass
class SessionSummary:
    session: CoachingSession
    turns: int
    needs_review: int
    first_words: str


@dataclass
class CoacheeOverview:
    coachee: Any
    sessions: list[SessionSummary]
    trends: list[OceanTrend]
    readings: int
    predictions: list[PredictionView]
    versions: list[VersionView]
    # Memory: each session's summary attempts as checked, and how well Shadow's predictions scored.
    memory_summaries: list[Any] = field(default_factory=list)
    brier: list[Any] = field(default_factory=list)


# --- Memory: summaries that failed their check, Brier scores -----------------------------


def flagged_summaries(coachee_ids: Any, limit: int = 50) -> list[Any]:
    """Summaries that failed every strategy, for the review queue (newest first)."""
    from agents.models import SessionSummary as StoredSummary
    from agents.models import SummaryStatus

    return list(
        StoredSummary.objects.filter(status=SummaryStatus.FLAGGED, session__coachee__in=coachee_ids)
        .select_related("session__coachee")
        .order_by("-created_at")[:limit]
    )


def memory_summaries(coachee: Any, limit: int = 100) -> list[Any]:
    from agents.models import SessionSummary as StoredSummary

    return list(
        StoredSummary.objects.filter(session__coachee=coachee)
        .select_related("session")
        .order_by("-session__created_at", "scope", "covers_until_seq", "attempt")[:limit]
    )


KIND_LABELS = {
    "stated_goals": "Goal",
    "revealed_priorities": "Priority",
    "predictions": "Prediction",
    "patterns": "Pattern",
}
# Plurals spelled out: Django's |pluralize makes "prioritys".
KIND_PLURALS = {"Goal": "goals", "Priority": "priorities", "Prediction": "predictions", "Pattern": "patterns"}
MAX_CHANGES = 8


def _item_text(kind: str, item: dict[str, Any]) -> str:
    if kind == "predictions":
        return f"{item.get('commitment', '?')} ({item.get('probability_pct', '?')}%, {item.get('horizon_days', '?')} d)"
    if kind == "patterns":
        return f"{str(item.get('pattern_class', '?')).replace('_', ' ')} ({item.get('confidence_pct', '?')}%)"
    return str(item.get("text", "?"))


def blackboard_items(data: Any) -> list[BlackboardItem]:
    items = []
    for kind, label in KIND_LABELS.items():
        for item in (data or {}).get(kind, []) if isinstance(data, dict) else []:
            if isinstance(item, dict):
                items.append(
                    BlackboardItem(label, _item_text(kind, item), bool(item.get("hidden")), str(item.get("status", "")))
                )
    return items


def _by_id(data: Any, kind: str) -> dict[str, dict[str, Any]]:
    entries = data.get(kind, []) if isinstance(data, dict) else []
    return {str(item.get("id") or i): item for i, item in enumerate(entries) if isinstance(item, dict)}


def blackboard_changes(before: Any, after: Any) -> list[str]:
    """What changed from one version to the next, in words."""
    changes = []
    for kind, label in KIND_LABELS.items():
        old, new = _by_id(before, kind), _by_id(after, kind)
        for key, item in new.items():
            if key not in old:
                changes.append(f"+ {label}: {_item_text(kind, item)}")
                continue
            prior = old[key]
            if _item_text(kind, prior) != _item_text(kind, item):
                changes.append(f"~ {label}: {_item_text(kind, prior)} → {_item_text(kind, item)}")
            if bool(prior.get("hidden")) != bool(item.get("hidden")):
                changes.append(f"{'hidden' if item.get('hidden') else 'shown again'}: {_item_text(kind, item)}")
            if prior.get("status") != item.get("status") and item.get("status"):
                changes.append(f"~ {label} now {item.get('status')}: {_item_text(kind, item)}")
        for key, item in old.items():
            if key not in new:
                changes.append(f"- {label}: {_item_text(kind, item)}")
    return changes


def count_label(n: int, label: str) -> str:
    """'1 priority', '3 priorities'."""
    return f"{n} {label.lower() if n == 1 else KIND_PLURALS[label]}"


def blackboard_history(coachee_id: int) -> list[VersionView]:
    """Every version, newest first, with where it came from and what it changed."""
    versions = list(
        BlackboardVersion.objects.filter(coachee_id=coachee_id)
        .select_related("source_turn__session", "edited_by")
        .annotate(source_turn_number=turn_number("source_turn__"))
        .order_by("version")
    )
    views: list[VersionView] = []
    for index, version in enumerate(versions):
        previous = versions[index - 1] if index else None
        revert_of = None
        if version.edited_by_id is not None and version.edited_by_id != coachee_id:
            for older in reversed(versions[:index]):
                if older.data == version.data:
                    revert_of = older.version
                    break
        turn = version.source_turn
        editor = version.edited_by.get_username() if version.edited_by else ""
        if revert_of is not None:
            source = f"Reverted to v{revert_of} by {editor}"
        elif version.edited_by_id == coachee_id:
            source = "Corrected by the coachee on their memory page"
        elif version.edited_by_id is not None:
            source = f"Edited by {editor}"
        elif version.source_agent:
            source = f"{AGENT_LABELS.get(version.source_agent, version.source_agent)}"
            if turn is not None:
                number = getattr(version, "source_turn_number", None)
                source += f", turn {number} of the session of {timezone.localtime(turn.session.created_at):%-d %b %Y}"
            else:
                source += " (turn deleted)"
        else:
            source = "Unknown source"
        changes = blackboard_changes(previous.data if previous else {}, version.data)
        data = version.data if isinstance(version.data, dict) else {}
        views.append(
            VersionView(
                version=version,
                is_latest=index == len(versions) - 1,
                source=source,
                source_turn_id=version.source_turn_id,
                source_session_id=turn.session_id if turn else None,
                revert_of=revert_of,
                counts=[count_label(len(data.get(kind, [])), label) for kind, label in KIND_LABELS.items()],
                changes=changes[:MAX_CHANGES],
                more_changes=max(0, len(changes) - MAX_CHANGES),
                items=blackboard_items(data),
            )
        )
    views.reverse()
    return views


def _persona_readings(runs: Iterable[AgentRun]) -> list[tuple[CoachingSession, PersonaOutput]]:
    """The last valid Persona reading of each session, sessions in order."""
    by_session: dict[int, tuple[CoachingSession, PersonaOutput]] = {}
    for run in runs:
        output = parse_output(run)
        if isinstance(output, PersonaOutput):
            by_session[run.turn.session_id] = (run.turn.session, output)
    return sorted(by_session.values(), key=lambda pair: (pair[0].created_at, pair[0].pk))


def _predictions(
    shadow_runs: Sequence[AgentRun],
    persona_runs: Sequence[AgentRun],
    user_messages: list[Message],
    latest_data: Any,
) -> list[PredictionView]:
    now = timezone.now()
    status_by_turn = {
        p.get("source_turn"): str(p.get("status", ""))
        for p in (latest_data or {}).get("predictions", [])
        if isinstance(p, dict)
    }
    shadows = [(run, out) for run in shadow_runs if isinstance(out := parse_output(run), ShadowOutput)]
    personas = [(run, out) for run in persona_runs if isinstance(out := parse_output(run), PersonaOutput)]
    views = []
    for index, (run, shadow) in enumerate(shadows):
        made_at = run.finished_at or run.started_at
        due_at = made_at + timedelta(days=shadow.follow_through.horizon_days)
        later = [
            LaterMessage(m.created_at, m.session_id, excerpt(m.text, 160))
            for m in user_messages
            if made_at < m.created_at <= due_at and m.pk != run.turn.user_message_id
        ]
        in_window = [out for r, out in personas if made_at < r.started_at <= due_at and r.turn_id != run.turn_id]
        next_shadow = shadows[index + 1][1] if index + 1 < len(shadows) else None
        window_open = now < due_at
        views.append(
            PredictionView(
                commitment=shadow.follow_through.commitment,
                probability_pct=shadow.follow_through.probability_pct,
                horizon_days=shadow.follow_through.horizon_days,
                rationale=shadow.follow_through.rationale,
                made_at=made_at,
                due_at=due_at,
                session_id=run.turn.session_id,
                turn_id=run.turn_id,
                turn_number=getattr(run, "turn_number", None),
                session_started=run.turn.session.created_at,
                window_open=window_open,
                status=status_by_turn.get(run.turn_id, ""),
                later_messages=later[:3],
                later_follow_through=[(f.goal, f.percent) for f in in_window[-1].follow_through] if in_window else [],
                next_pattern=(
                    f"{next_shadow.pattern_class.replace('_', ' ')} ({next_shadow.pattern_confidence_pct}%)"
                    if next_shadow
                    else ""
                ),
            )
        )
    views.reverse()  # newest first
    return views


def coachee_overview(coachee: Any) -> CoacheeOverview:
    """OCEAN over sessions, follow-through predictions beside what came after, the sessions,
    and the blackboard's history. The caller checks the coachee is in scope."""
    runs = list(
        AgentRun.objects.filter(
            turn__session__coachee=coachee,
            agent__in=[Agent.PERSONA, Agent.SHADOW],
            status=RunStatus.SUCCEEDED,
        )
        .select_related("turn__session")
        .annotate(turn_number=turn_number("turn__"))
        .order_by("started_at", "pk")
    )
    persona_runs = [r for r in runs if r.agent == Agent.PERSONA]
    shadow_runs = [r for r in runs if r.agent == Agent.SHADOW]
    readings = _persona_readings(persona_runs)
    user_messages = list(Message.objects.filter(session__coachee=coachee, role=Role.USER).order_by("created_at", "pk"))
    first_words: dict[int, str] = {}
    for m in user_messages:
        first_words.setdefault(m.session_id, excerpt(m.text, 80))
    history = blackboard_history(coachee.pk)
    sessions = (
        CoachingSession.objects.filter(coachee=coachee)
        .annotate(
            turn_count=Count("turns", distinct=True),
            review_count=Count(
                "turns",
                filter=~Q(turns__escalation=Escalation.NONE) | Q(turns__degraded=True) | Q(turns__flagged=True),
                distinct=True,
            ),
        )
        .order_by("-created_at")
    )
    return CoacheeOverview(
        coachee=coachee,
        sessions=[
            SessionSummary(s, getattr(s, "turn_count", 0), getattr(s, "review_count", 0), first_words.get(s.pk, ""))
            for s in sessions
        ],
        trends=ocean_trends(readings) if readings else [],
        readings=len(readings),
        predictions=_predictions(
            shadow_runs, persona_runs, user_messages, history[0].version.data if history else None
        ),
        versions=history,
        memory_summaries=memory_summaries(coachee),
        brier=predictions.brier_scores(coachee_id=coachee.pk),
    )


@dataclass
class CoacheeRow:
    coachee: Any
    sessions: int
    last_session: datetime | None
    in_queue: int


def coachee_rows(coachees: QuerySet[Any], queue: QuerySet[Turn]) -> list[CoacheeRow]:
    """The coachees in scope with their session counts and open review items."""
    in_queue: dict[int, int] = {}
    for coachee_id in queue.values_list("session__coachee_id", flat=True):
        in_queue[coachee_id] = in_queue.get(coachee_id, 0) + 1
    annotated = coachees.annotate(
        session_count=Count("coaching_sessions", distinct=True), last_session=Max("coaching_sessions__created_at")
    ).order_by("username")
    return [
        CoacheeRow(
            user, getattr(user, "session_count", 0), getattr(user, "last_session", None), in_queue.get(user.pk, 0)
        )
        for user in annotated
    ]


# --- Inbox: what is new since the coach last looked ---------------------------------------

# A coach who never marked their inbox sees the last week as new.
INBOX_FIRST_LOOK = timedelta(days=7)


@dataclass
class InboxRow:
    coachee: Any
    new_turns: int
    new_in_queue: int  # of those, turns the review queue lists (a failed check, a thumbs-down ...)
    new_escalations: int  # of those, refer or crisis
    latest: datetime


@dataclass
class Inbox:
    since: datetime
    rows: list[InboxRow]

    @property
    def empty(self) -> bool:
        return not self.rows


def inbox(turns: QuerySet[Turn], queue: QuerySet[Turn], seen_at: datetime | None) -> Inbox:
    """Per coachee, the turns started since `seen_at` among `turns` (already scoped to the coach),
    how many of them the review queue lists and how many escalated; most recent coachee first."""
    since = seen_at or timezone.now() - INBOX_FIRST_LOOK
    new = turns.filter(started_at__gt=since)
    queued = set(queue.filter(started_at__gt=since).values_list("pk", flat=True))
    rows: dict[int, InboxRow] = {}
    for turn in new.select_related("session__coachee").order_by("-started_at", "-pk"):
        coachee = turn.session.coachee
        row = rows.setdefault(coachee.pk, InboxRow(coachee, 0, 0, 0, turn.started_at))
        row.new_turns += 1
        row.new_in_queue += turn.pk in queued
        row.new_escalations += turn.escalation in (Escalation.REFER, Escalation.CRISIS)
    return Inbox(since, list(rows.values()))


# --- CSV export -----------------------------------------------------------------------


def _csv_cell(value: Any) -> str:
    """A cell no spreadsheet will run as a formula (coachee text is untrusted)."""
    if value is None:
        return ""
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


SESSION_EXPORT_HEADER = [
    "session",
    "coachee",
    "status",
    "locale",
    "created_at",
    "ended_at",
    "turns",
    "escalated_turns",
    "degraded_turns",
    "flagged_turns",
]
TURN_EXPORT_HEADER = [
    "turn",
    "session",
    "coachee",
    "started_at",
    "finished_at",
    "status",
    "escalation",
    "degraded",
    "flagged",
    "flag_reason",
    "critic_passed",
    "coachee_message",
    "coach_reply",
    "full_answer",
]


def session_export_rows(sessions: QuerySet[CoachingSession]) -> Iterator[list[str]]:
    yield SESSION_EXPORT_HEADER
    annotated = (
        sessions.select_related("coachee")
        .annotate(
            n_turns=Count("turns", distinct=True),
            n_escalated=Count("turns", filter=~Q(turns__escalation=Escalation.NONE), distinct=True),
            n_degraded=Count("turns", filter=Q(turns__degraded=True), distinct=True),
            n_flagged=Count("turns", filter=Q(turns__flagged=True), distinct=True),
        )
        .order_by("created_at", "pk")
    )
    for s in annotated:
        values = [
            s.pk,
            s.coachee.get_username(),
            s.status,
            s.locale,
            s.created_at,
            s.ended_at,
            getattr(s, "n_turns", 0),
            getattr(s, "n_escalated", 0),
            getattr(s, "n_degraded", 0),
            getattr(s, "n_flagged", 0),
        ]
        yield [_csv_cell(v) for v in values]


def turn_export_rows(turns: QuerySet[Turn]) -> Iterator[list[str]]:
    yield TURN_EXPORT_HEADER
    selected = turns.select_related("session__coachee", "user_message", "coach_message", "synth_message").order_by(
        "started_at", "pk"
    )
    for t in selected:
        rounds = critic_rounds(t.critic_result)
        values = [
            t.pk,
            t.session_id,
            t.session.coachee.get_username(),
            t.started_at,
            t.finished_at,
            t.status,
            t.escalation,
            t.degraded,
            t.flagged,
            t.flag_reason,
            "" if not rounds else rounds[-1].passed,
            t.user_message.text,
            t.coach_message.text if t.coach_message else "",
            t.synth_message.text if t.synth_message else "",
        ]
        yield [_csv_cell(v) for v in values]
