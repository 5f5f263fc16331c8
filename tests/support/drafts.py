"""Operators' prompt drafts and replays for tests: the drafts, a stored Coach run, snapshots of
what a replay must leave unchanged."""

from __future__ import annotations

from typing import Any

from agents.models import AgentRun, PromptStatus, PromptVersion, RunStatus
from tests.support.turns import stored_turn

CANARY = "CANARY-41c9-coachee-words"


PREFS = {"directness": 2, "warmth": 4, "structure": 3, "challenge": 2, "pacing": 2}
ORIGINAL = {
    "preferences": PREFS,
    "strategy": "support",
    "suggested_moves": ["tiny_next_step"],
    "rationale": "Small steps first.",
}


REPLAYED = {
    "preferences": PREFS | {"structure": 5},
    "strategy": "structure",
    "suggested_moves": ["if_then_plan"],
    "rationale": "A plan with a cue.",
}


DRAFT_BODY = "You are Plasticity, draft two. Prefer structure.\nMoves you may suggest:\n${moves}\n"


def snapshot(run: AgentRun) -> tuple[Any, ...]:
    run.refresh_from_db()
    return (
        run.status,
        run.raw_output,
        run.parsed_output,
        run.prompt_version_id,
        run.validation_errors,
        run.prompt_tokens,
        run.completion_tokens,
        run.latency_ms,
        run.finished_at,
    )


def active(agent: str) -> PromptVersion:
    return PromptVersion.objects.get(agent=agent, status=PromptStatus.ACTIVE)


def stored_coach_run(username: str, reply: str) -> AgentRun:
    """Coach's run on a stored turn, as coach_record_start and coach_end leave it."""
    turn_id = stored_turn(username).turn_id
    return AgentRun.objects.create(
        turn_id=turn_id,
        agent="coach",
        status=RunStatus.SUCCEEDED,
        prompt_version=PromptVersion.objects.get(agent="coach", status=PromptStatus.ACTIVE),
        prompt_values={"blocked_moves": "none"},
        raw_output=reply,
    )
