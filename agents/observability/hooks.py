"""The call sites that feed both metrics and traces: one line each in chat/coach.py and the turns package."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.observability import metrics, tracing

if TYPE_CHECKING:
    from agents.chat.coach import CoachCall
    from agents.llm.client import StreamState
    from agents.llm.errors import LLMError
    from agents.models import Turn


def coach_ended(
    *, call: CoachCall, error: LLMError | None, state: StreamState, latency_ms: int, prompt_tokens: int
) -> None:
    """Coach's reply and run are saved (coach.coach_end, after its commit). The values are the
    ones its AgentRun holds, so the token counters add up to the rows."""
    error_text = f"{error.code}: {error}" if error else ""
    completion_tokens = state.completion_tokens or state.chunks
    metrics.coach_ended(
        endpoint=call.spec.name,
        status="failed" if error else "succeeded",
        error=error_text,
        latency_ms=latency_ms,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        turn_started_at=call.turn.started_at.timestamp(),
        first_token_at=state.first_token_at,
    )
    tracing.coach_recorded(
        turn_id=call.turn_id,
        model=call.spec.model_id,
        latency_ms=latency_ms,
        status="failed" if error else "succeeded",
        error=error_text,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )


def turn_finished(*, turn: Turn, fallback: bool) -> None:
    """The turn's full answer is delivered and committed (turns.finish.turn_finish)."""
    if turn.finished_at is None:
        return
    metrics.turn_finished(
        started_at=turn.started_at.timestamp(),
        finished_at=turn.finished_at.timestamp(),
        degraded=turn.degraded,
        fallback=fallback,
        flagged=turn.flagged,
    )
    tracing.workflow_recorded(
        turn_id=turn.pk,
        started_at=turn.started_at,
        finished_at=turn.finished_at,
        attributes={
            "coaching.turn.degraded": turn.degraded,
            "coaching.turn.fallback": fallback,
            "coaching.turn.flagged": turn.flagged,
            "coaching.turn.escalation": turn.escalation,
        },
    )
