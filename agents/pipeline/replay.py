"""Operators' replays: a stored AgentRun run again with another prompt body, nothing written.
Apart from the turn's steps: only the operations pages call it (operations.replay)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from agents.memory.context import SharedContext, agent_messages
from agents.models import AgentConfig, AgentRun
from agents.pipeline.runner import instructions_for
from agents.roles import structured
from agents.roles.schemas import OUTPUT_SCHEMAS


@dataclass
class ReplayResult:
    run_id: int
    answer: structured.StructuredAnswer
    latency_ms: int

    @property
    def valid(self) -> bool:
        return self.answer.output is not None


class UntrustedEndpointError(ValueError):
    """The endpoint is not marked trusted for coachee data: nothing of a coachee is sent to it."""

    def __init__(self, endpoint_name: str) -> None:
        super().__init__(f"endpoint {endpoint_name} is not marked trusted for coachee data by a platform administrator")


def agent_run_replay(*, run: AgentRun, prompt_body: str, timeout_s: float = 120.0) -> ReplayResult:
    """Run a stored AgentRun again with another prompt body, on the same stored inputs (the
    turn's shared prompt, placeholder values, additions and allowed values) through the agent's
    configured endpoint. Nothing is written: the stored run is the original to compare with."""
    if run.agent not in OUTPUT_SCHEMAS:
        raise ValueError(f"{run.agent} runs cannot be replayed (only JSON agents)")
    turn = run.turn
    if not turn.shared_prompt:
        raise ValueError("this turn predates stored prompts and cannot be replayed")
    config = AgentConfig.objects.select_related("endpoint").get(agent=run.agent)
    if not config.endpoint.trusted_for_coachee_data:
        # The stored prompt quotes the coachee: it goes only where a platform admin vouched for.
        raise UntrustedEndpointError(config.endpoint.name)
    shared = SharedContext(text=turn.shared_prompt, tokens=0, message_ids=[])
    started = time.monotonic()
    answer = structured.complete_structured(
        agent=run.agent,
        config=config,
        messages=agent_messages(shared, instructions_for(prompt_body, run.prompt_values, run.extra_instructions)),
        enums=run.enums,
        deadline=time.time() + timeout_s,
        turn_id=turn.pk,
        replay=True,
        coachee_id=turn.session.coachee_id,
    )
    return ReplayResult(run.pk, answer, int((time.monotonic() - started) * 1000))
