"""What Synth is given beside the coach's reply: the turn's arbitration (stored once, with its
conflicts and any safety notice) and the findings of Shadow and Persona as short lines. Apart
from steps.py so Synth's step reads as its order: brief, Synth, gate, delivery."""

from __future__ import annotations

from django.db import transaction

from agents.memory.context import fence
from agents.models import Agent, Conflict, Escalation, Turn
from agents.pipeline.runner import output_as
from agents.roles.arbitration import Arbitration, MoveInfo, arbitrate, arbitrate_crisis
from agents.roles.schemas import AgentOutput, PersonaOutput, PlasticityOutput, ShadowOutput, StabilityOutput
from agents.transactions import bookkeeping_atomic
from agents.turns import crisis


def arbitration_for(turn: Turn, catalog: dict[str, MoveInfo], outputs: dict[str, AgentOutput]) -> Arbitration:
    """Arbitrate once per turn; the brief and its conflicts are stored together."""
    result = arbitrate(
        shadow=output_as(outputs, Agent.SHADOW, ShadowOutput),
        persona=output_as(outputs, Agent.PERSONA, PersonaOutput),
        plasticity=output_as(outputs, Agent.PLASTICITY, PlasticityOutput),
        stability=output_as(outputs, Agent.STABILITY, StabilityOutput),
        catalog=catalog,
    )
    if turn.escalation == Escalation.CRISIS and result.brief["escalation"] != Escalation.CRISIS:
        # The pre-gate recognised crisis language: that stands whatever Stability concluded.
        result = arbitrate_crisis(result, someone_else=bool((turn.crisis_signal or {}).get("someone_else")))
    # The brief is bookkeeping (a lost one is simply computed again), a safety notice is not.
    notice_due = result.brief["escalation"] in ("refer", "crisis") and turn.escalation == Escalation.NONE
    with transaction.atomic() if notice_due else bookkeeping_atomic():
        locked = Turn.objects.select_for_update().get(pk=turn.pk)
        if locked.brief is not None:  # a redelivered task: the first arbitration stands
            return Arbitration(brief=locked.brief)
        Conflict.objects.bulk_create(
            Conflict(
                turn=turn,
                rule=c.rule,
                left_agent=c.left_agent,
                left_claim=c.left_claim,
                right_agent=c.right_agent,
                right_claim=c.right_claim,
                resolution=c.resolution,
            )
            for c in result.conflicts
        )
        locked.brief = result.brief
        locked.escalation = result.brief["escalation"]
        locked.save(update_fields=["brief", "escalation"])
        if locked.escalation in ("refer", "crisis") and turn.escalation == Escalation.NONE:
            # The resources card goes out now, before Synth writes: help first. (After a
            # pre-gate hit it is already on the page.)
            crisis.safety_notice_emit(turn=turn, level=locked.escalation)
    turn.brief = result.brief
    return result


def specialists_text(outputs: dict[str, AgentOutput]) -> str:
    """Shadow's and Persona's findings for Synth, as short lines rather than their JSON: Synth's
    own part is the largest of the turn, and it must leave the shared prefix >= 80% of its
    prompt within the budget (context.py). Evidence ids are left out; Synth does not cite."""
    shadow = output_as(outputs, Agent.SHADOW, ShadowOutput)
    persona = output_as(outputs, Agent.PERSONA, PersonaOutput)
    parts = []
    if shadow is not None:
        prediction = shadow.follow_through
        parts += [
            "shadow: stated goals: " + ("; ".join(g.text for g in shadow.stated_goals) or "none"),
            "shadow: revealed priorities: " + ("; ".join(p.text for p in shadow.revealed_priorities) or "none"),
            f"shadow: follow-through on '{prediction.commitment}': {prediction.probability_pct}% within "
            f"{prediction.horizon_days} days ({prediction.rationale})",
            f"shadow: pattern {shadow.pattern_class} ({shadow.pattern_confidence_pct}%)",
        ]
    else:
        parts.append("shadow: (missing)")
    if persona is not None:
        ocean = ", ".join(f"{name} {t.score}±{t.uncertainty}" for name, t in persona.ocean)
        parts += [
            f"persona: OCEAN {ocean}",
            "persona: recurring goals: " + ("; ".join(persona.recurring_goals) or "none"),
            "persona: follow-through: "
            + ("; ".join(f"{f.goal} {f.percent}%" for f in persona.follow_through) or "none"),
            "persona: growth edges: " + ("; ".join(persona.growth_edges) or "none"),
        ]
    else:
        parts.append("persona: (missing)")
    return "\n".join(["<<<data", fence("\n".join(parts)), "data>>>"])
