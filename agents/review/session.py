"""A session's review: the transcript in order, each coachee message with its turn (replies,
every agent's output, arbitration, the critic gate, failures, a timeline, coaches' annotations).

Plain functions over the ORM. They do not decide who may see what: the admin hands them objects
it has already scoped (agents/admin/scoping.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Prefetch, QuerySet

from agents.models import (
    AgentRun,
    Annotation,
    AnswerFeedback,
    CoachingSession,
    Escalation,
    Message,
    QualityFinding,
    RunStatus,
    Turn,
)
from agents.rendering import markdown_to_safe_html
from agents.review.annotations import alarm_name
from agents.review.charts import Timeline, format_ms, timeline
from agents.review.decisions import (
    BriefView,
    ConflictView,
    CriticRound,
    brief_view,
    check_reasons,
    conflict_views,
    critic_rounds,
)
from agents.review.labels import move_catalog, run_label, run_sort_key
from agents.review.outputs import AgentOutputView, agent_output_view

ESCALATION_NOTES = {
    "monitor": "Stability asked to keep an eye on this coachee.",
    "refer": "The reply pointed the coachee to professional help.",
    "crisis": "Crisis: the coachee was shown crisis resources and a calm reply.",
}


@dataclass
class FailureView:
    label: str
    error: str
    validation_errors: list[str]
    attempts: int
    latency: str


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
    alarm: str  # what a coach may find a false alarm (annotations.alarm_name); "" when none
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
    related = ("user_message", "coach_message", "synth_message", "crisis_dismissed_by")
    return turns.select_related(*related).prefetch_related(
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
        why = f"classifier, score {signal.get('score')}"
        if "wording" in signal:  # the two models' own probabilities (older turns lack them)
            why += f" (wording model {signal['wording']}, meaning model {signal.get('meaning_model')})"
        why += f"; strongest n-grams {features or 'none'}"
        # The embedding's share in the wording model, in log-odds ("meaning" on turns before the
        # meaning model; the oldest turns lack it).
        share = signal.get("embedding_share", signal.get("meaning"))
        if share is not None:
            why += f"; the message's embedding weighed {share:+} in the wording model"
        if signal.get("sentence"):  # read sentence by sentence (turns before 2026-12-06 lack it)
            why += f"; of the sentence “{signal['sentence']}”"
        if signal.get("context"):
            where = "beside it in the message" if signal.get("sentence") else "earlier in the session"
            why += f"; distress {where} {signal.get('context')}"
    level = signal.get("level", "")
    if signal.get("someone_else"):  # turns before 2026-12-06 lack it
        why += (
            f"; told as someone else's crisis (probability {signal.get('someone_else_probability')}):"
            " the reply spoke to a helper"
        )
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
        for run in sorted(runs, key=run_sort_key)
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
        alarm=alarm_name(turn),
        outputs=[agent_output_view(run, catalog, seq_by_id) for run in sorted(runs, key=run_sort_key)],
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
