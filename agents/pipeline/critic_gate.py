"""The critic gate on Synth's reply: declared blocked moves, the critic agent's reading and the
deterministic unsafe-content check. Apart from steps.py: Synth's step calls it once per round."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.memory.context import SharedContext, fence
from agents.models import Agent, Turn
from agents.pipeline.runner import catalog_text, run_json_agent, stage_deadline
from agents.roles.arbitration import MoveInfo
from agents.roles.schemas import CriticOutput, SynthOutput
from agents.safety.quality.unsafe import unsafe_content


@dataclass
class GateVerdict:
    passed: bool
    violations: list[str]
    critic_ok: bool


def critic_gate(
    *,
    turn: Turn,
    shared: SharedContext,
    synth: SynthOutput,
    brief: dict[str, Any],
    catalog: dict[str, MoveInfo],
    round: int,
) -> GateVerdict:
    """Declared moves are checked exactly; the text by a critic call and by a deterministic
    unsafe-content check (method or means, diagnosis, medication advice, claims to be a human
    or therapist) that works when the critic cannot. Fails closed."""
    blocked = list(brief["blocked_moves"])
    violations = [f"declared blocked move {key}" for key in synth.moves_used if key in blocked]
    violations += [f"contains {kind.replace('_', ' ')} (safety check)" for kind in unsafe_content(synth.reply)]
    result = run_json_agent(
        turn=turn,
        agent=Agent.CRITIC,
        shared=shared,
        values={
            "blocked_moves": catalog_text(catalog, blocked),
            "reply": "<<<data\n" + fence(synth.reply) + "\ndata>>>",
        },
        enums={"blocked_moves": blocked},
        deadline=stage_deadline(turn, "synth"),
        round=round,
    )
    critic = result.output
    if isinstance(critic, CriticOutput):
        violations += [f"uses blocked move {key}" for key in critic.violated_moves]
        violations += [f"contains {kind.replace('_', ' ')}" for kind in critic.unsafe_content]
        return GateVerdict(passed=not violations, violations=violations, critic_ok=True)
    # The text could not be checked: pass only if nothing is blocked (declared moves are clean).
    return GateVerdict(passed=not violations and not blocked, violations=violations, critic_ok=False)
