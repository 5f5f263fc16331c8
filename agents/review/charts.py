"""Chart geometry for the review pages: a persona's OCEAN bars, OCEAN over sessions and a turn's
timeline. Computed here and only placed by the templates, so the SVG is server-rendered with no
JavaScript; coordinates are preformatted strings so no locale can change them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from agents.models import AgentRun, CoachingSession, RunStatus, Turn
from agents.review.labels import AGENT_LABELS, excerpt, run_label, run_sort_key
from agents.roles.schemas import PersonaOutput

TRAITS = [
    ("openness", "Openness"),
    ("conscientiousness", "Conscientiousness"),
    ("extraversion", "Extraversion"),
    ("agreeableness", "Agreeableness"),
    ("neuroticism", "Neuroticism"),
]


def _n(value: float) -> str:
    """A coordinate for SVG: at most one decimal, never a locale's comma."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


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


def _run_duration_ms(run: AgentRun, end: datetime) -> int:
    if run.latency_ms is not None:
        return int(run.latency_ms)
    stop = run.finished_at or end
    return max(0, int((stop - run.started_at).total_seconds() * 1000))


def timeline(turn: Turn, runs: Sequence[AgentRun]) -> Timeline:
    """A Gantt chart of the turn: one row per agent run, from when it started (after the
    coachee's message) for as long as it took, and its tokens as a stacked bar beside it."""
    ordered = sorted(runs, key=run_sort_key)
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
