"""The prediction ledger: each Shadow follow-through prediction, resolved later, scored by Brier.

A prediction made in one session is offered to Shadow in later sessions (by ledger id, as an
enum of the schema, so Shadow can only resolve predictions that exist and are open); Shadow
judges from what the coachee reports whether they did it. The Brier score of a group of
resolved predictions is the mean of (probability - outcome)^2: 0 is perfect, 0.25 is what
always saying 50% earns, 1 is always certain and always wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError
from django.db.models import Avg, Case, Count, F, FloatField, Value, When
from django.utils import timezone

from agents.memory.context import fenced
from agents.models import AgentRun, Prediction, PredictionStatus, Turn
from agents.roles.schemas import ShadowOutput
from agents.transactions import bookkeeping_atomic

# Open predictions offered to Shadow per turn: the newest few; the list is part of its prompt.
OFFERED_PER_TURN = 5


def ledger_record(*, turn: Turn, shadow: ShadowOutput, run: AgentRun) -> Prediction | None:
    """One ledger row per turn's prediction (a redelivered Shadow task finds it there)."""
    made_at = timezone.now()
    prediction = shadow.follow_through
    try:
        # Bookkeeping, like the blackboard version written beside it (transactions.py).
        with bookkeeping_atomic():
            return Prediction.objects.create(
                coachee_id=turn.session.coachee_id,
                turn=turn,
                agent_run=run,
                commitment=prediction.commitment,
                probability=prediction.probability_pct / 100,
                horizon_days=prediction.horizon_days,
                made_at=made_at,
                due_at=made_at + timedelta(days=prediction.horizon_days),
                prompt_version=run.prompt_version,
                model_id=run.model_id,
            )
    except IntegrityError:
        return None


def open_for_resolution(*, turn: Turn) -> list[Prediction]:
    """Open predictions from the coachee's earlier sessions, newest first (one query)."""
    return list(
        Prediction.objects.filter(coachee_id=turn.session.coachee_id, status=PredictionStatus.OPEN)
        .exclude(turn__session_id=turn.session_id)
        .order_by("-made_at")
        .only("id", "commitment", "made_at", "due_at")[:OFFERED_PER_TURN]
    )


def resolution_instructions(open_predictions: list[Prediction]) -> str:
    if not open_predictions:
        return ""
    lines = [
        f"[{p.pk}] {p.commitment} (predicted {p.made_at.date().isoformat()}, due {p.due_at.date().isoformat()})"
        for p in open_predictions
    ]
    return (
        "Open predictions from earlier sessions. Resolve one in `resolutions` only if the coachee's "
        "words say whether they did it; otherwise leave it out.\n" + fenced("\n".join(lines))
    )


def resolutions_apply(*, turn: Turn, shadow: ShadowOutput) -> int:
    """Close the predictions Shadow resolved; an already-resolved one is left as it was."""
    resolved = 0
    if not shadow.resolutions:
        return 0
    with bookkeeping_atomic():
        for resolution in shadow.resolutions:
            resolved += Prediction.objects.filter(
                pk=resolution.prediction_id, coachee_id=turn.session.coachee_id, status=PredictionStatus.OPEN
            ).update(
                status=PredictionStatus.RESOLVED,
                outcome=resolution.done,
                resolved_at=timezone.now(),
                resolved_by_turn=turn,
                resolution_note=resolution.evidence[:200],
            )
    return resolved


@dataclass
class BrierRow:
    prompt_agent: str
    prompt_version: int | None
    model_id: str
    resolved: int
    open: int
    brier: float | None


def brier_scores(*, coachee_id: int | None = None) -> list[BrierRow]:
    """Brier score per (prompt version, model), over resolved predictions (all coachees, or one)."""
    rows = Prediction.objects.all()
    if coachee_id is not None:
        rows = rows.filter(coachee_id=coachee_id)
    outcome = Case(When(outcome=True, then=Value(1.0)), default=Value(0.0), output_field=FloatField())
    grouped = (
        rows.values("prompt_version__agent", "prompt_version__version", "model_id")
        .annotate(
            resolved=Count(Case(When(status=PredictionStatus.RESOLVED, then=Value(1)))),
            open=Count(Case(When(status=PredictionStatus.OPEN, then=Value(1)))),
            brier=Avg(
                Case(
                    When(
                        status=PredictionStatus.RESOLVED,
                        then=(F("probability") - outcome) * (F("probability") - outcome),
                    ),
                    output_field=FloatField(),
                )
            ),
        )
        .order_by("prompt_version__agent", "-prompt_version__version", "model_id")
    )
    return [
        BrierRow(
            prompt_agent=row["prompt_version__agent"] or "shadow",
            prompt_version=row["prompt_version__version"],
            model_id=row["model_id"],
            resolved=row["resolved"],
            open=row["open"],
            brier=round(row["brier"], 4) if row["brier"] is not None else None,
        )
        for row in grouped
    ]


def brier_table(*, coachee_id: int | None = None) -> list[dict[str, Any]]:
    return [row.__dict__ for row in brier_scores(coachee_id=coachee_id)]
