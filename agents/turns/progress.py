"""The agents' live progress: status events (not persisted; a resuming client gets a snapshot
built from the turn's runs), and the degraded notice when one of them fails."""

from __future__ import annotations

from typing import Any

from agents.models import (
    AgentRun,
    RunStatus,
    Turn,
    TurnStatus,
)
from agents.turns import event_log, finish


def agent_status_emit(*, turn: Turn, agent: str, state: str, ms: int | None = None) -> None:
    """Live progress of one agent. Not persisted and without a seq: it is a view of the turn's
    AgentRun rows, which a resuming client gets as a snapshot (agent_statuses); persisting it
    cost a locked, durable transaction per event on the turn's critical path."""
    event_log.group_send_soon(turn.session_id, agent_status_event(turn_id=turn.pk, agent=agent, state=state, ms=ms))
    if state == "failed":
        finish.degraded_notice_if_open(turn_id=turn.pk, agents=[agent])


def agent_status_event(*, turn_id: int, agent: str, state: str, ms: int | None) -> dict[str, Any]:
    return {"type": "agent.status", "turn_id": turn_id, "agent": agent, "state": state, "ms": ms}


RUN_STATES: dict[str, str] = {
    RunStatus.RUNNING: "started",
    RunStatus.SUCCEEDED: "succeeded",
    RunStatus.FAILED: "failed",
}


def agent_statuses(*, session_id: int) -> list[dict[str, Any]]:
    """The agent.status events of the session's running turns as they stand now (for resume)."""
    runs = (
        AgentRun.objects.filter(turn__session_id=session_id, turn__status=TurnStatus.RUNNING)
        .exclude(agent="coach")
        .order_by("turn_id", "started_at")
        .values_list("turn_id", "agent", "status", "latency_ms")
    )
    return [
        agent_status_event(turn_id=turn_id, agent=agent, state=RUN_STATES.get(status, "started"), ms=ms)
        for turn_id, agent, status, ms in runs
    ]
