"""Running one JSON agent of a turn: loading the turn and its shared prompt prefix, the call
through the roles' structured completion, and the AgentRun that records it (inputs, outcome, timing).
Apart from steps.py so the order of a turn reads there without this machinery."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import IntegrityError, InterfaceError, OperationalError, connection
from django.utils import timezone

from agents.llm.client import EndpointSpec
from agents.llm.errors import LLMOutputError
from agents.llm.routing import RouteReport
from agents.memory import tokens
from agents.memory.context import (
    TURN_PREFIX_FIELDS,
    SharedContext,
    agent_messages,
    build_shared_context,
    prefix_counter,
    shared_budget,
)
from agents.models import Agent, AgentConfig, AgentRun, ModelEndpoint, RunStatus, Turn
from agents.observability import metrics, tracing
from agents.prompts import render_prompt
from agents.roles import structured, turn_setup
from agents.roles.arbitration import MoveInfo
from agents.roles.schemas import OUTPUT_SCHEMAS, AgentOutput
from agents.transactions import bookkeeping_atomic
from agents.turns import progress, summaries

logger = logging.getLogger(__name__)
OutputT = TypeVar("OutputT", bound=AgentOutput)

# Shares of the turn's deadline by which each stage must be done. Each LLM call's timeout
# is capped by its stage's, so one hung agent costs its stage, never the whole turn.
STAGE_SHARES = {"shadow": 0.3, "specialists": 0.65, "synth": 0.95}


# --- Loading what a step needs ----------------------------------------------------------


def load_turn(turn_id: int) -> Turn:
    return Turn.objects.select_related("session__coachee", "user_message", "context_blackboard", "coach_message").get(
        pk=turn_id
    )


def stage_deadline(turn: Turn, stage: str) -> float:
    """Epoch seconds by which `stage` must be done."""
    span = (turn.deadline_at - turn.started_at).total_seconds()
    return turn.started_at.timestamp() + span * STAGE_SHARES[stage]


def turn_shared_context(turn: Turn) -> SharedContext:
    """The turn's shared prefix: built once (by Coach's preparation on accept, else by Shadow)
    and stored on the Turn, so every step loads it with the turn instead of rebuilding it."""
    return stored_shared_context(turn) or shared_context_store(turn, shared_context_build(turn))


def stored_shared_context(turn: Turn) -> SharedContext | None:
    if turn.shared_prompt and turn.shared_tokens is not None:
        return SharedContext(
            text=turn.shared_prompt,
            tokens=turn.shared_tokens,
            message_ids=list(turn.shared_message_ids),
            dropped=dict(turn.shared_dropped),
        )
    return None


def shared_context_build(turn: Turn) -> SharedContext:
    """Build the turn's prefix (not stored yet)."""
    configs = list(turn_setup.setup_for(turn.pk).configs.values())
    return build_shared_context(turn, budget=shared_budget(configs), counter=prefix_counter(turn.pk))


def shared_context_store(turn: Turn, shared: SharedContext) -> SharedContext:
    """Store a built prefix on the turn; the one stored first when another step was quicker."""
    with bookkeeping_atomic():
        stored = Turn.objects.filter(pk=turn.pk, shared_tokens__isnull=True).update(**shared.turn_fields())
    if not stored:
        # Another step of this turn stored its build first: every agent must see that one.
        turn.refresh_from_db(fields=TURN_PREFIX_FIELDS)
        return turn_shared_context(turn)
    for name, value in shared.turn_fields().items():
        setattr(turn, name, value)
    if summaries.history_needs_compaction(shared.dropped):
        summaries.in_session_compaction_schedule(turn=turn)
    return shared


def catalog_text(catalog: dict[str, MoveInfo], keys: list[str] | None = None) -> str:
    chosen = [catalog[k] for k in (keys if keys is not None else list(catalog)) if k in catalog]
    return "\n".join(f"- {m.key}: {m.name}. {m.description}" for m in chosen) or "(none)"


# --- Running one agent -------------------------------------------------------------------


@dataclass
class JsonCallResult:
    output: AgentOutput | None
    run: AgentRun


def instructions_for(body: str, values: dict[str, str], extra_instructions: str) -> str:
    """An agent's own part of the prompt: its prompt version filled in, then per-turn additions."""
    instructions = render_prompt(body, values)
    return instructions + "\n\n" + extra_instructions if extra_instructions else instructions


@tracing.traced_agent_run  # the `invoke_agent {name}` span
def run_json_agent(
    *,
    turn: Turn,
    agent: str,
    shared: SharedContext,
    values: dict[str, str],
    enums: dict[str, list[Any]],
    deadline: float,
    round: int = 1,
    extra_instructions: str = "",
) -> JsonCallResult:
    """Run one JSON agent once per (turn, agent, round), recording everything on its AgentRun,
    including the inputs a replay needs (placeholder values, additions, allowed values)."""
    schema = OUTPUT_SCHEMAS[agent]
    setup = turn_setup.setup_for(turn.pk)
    config, prompt = setup.config(agent), setup.prompt(agent)
    inputs = {
        "prompt_version": prompt,
        "endpoint": config.endpoint,
        "model_id": config.endpoint.model_id,
        "context_dropped": shared.dropped,
        "prompt_values": values,
        "extra_instructions": extra_instructions,
        "enums": enums,
        "started_at": timezone.now(),
    }
    try:
        # Insert first: the usual case, in one statement (the unique constraint on turn,
        # agent and round turns a second delivery's insert into the lookup below).
        with bookkeeping_atomic():
            run = AgentRun.objects.create(turn=turn, agent=agent, round=round, **inputs)
    except IntegrityError:
        run = AgentRun.objects.get(turn=turn, agent=agent, round=round)
        if run.status == RunStatus.RUNNING:
            # An earlier delivery died mid-call: run again, recording this attempt's inputs.
            for name, value in inputs.items():
                setattr(run, name, value)
            with bookkeeping_atomic():
                run.save(update_fields=list(inputs))
    if run.status != RunStatus.RUNNING:
        # Already done by an earlier delivery of this task: reuse, never redo.
        output = schema.model_validate(run.parsed_output, context=None) if run.status == RunStatus.SUCCEEDED else None
        return JsonCallResult(output, run)
    progress.agent_status_emit(turn=turn, agent=agent, state="started")
    started = time.monotonic()

    if not config.enabled:
        return _record_failure(run, turn, started, "agent is disabled", attempts=0)
    try:
        instructions = instructions_for(prompt.body, values, extra_instructions)
    except (KeyError, ValueError) as exc:
        # An operator's prompt names a placeholder this agent is not given.
        return _record_failure(run, turn, started, f"prompt v{prompt.version} cannot be filled: {exc}", attempts=0)

    messages = agent_messages(shared, instructions)
    answer = structured.complete_structured(
        agent=agent,
        config=config,
        messages=messages,
        enums=enums,
        deadline=deadline,
        turn_id=turn.pk,
        coachee_id=turn.session.coachee_id,
    )
    measured = measure_prompt(config, messages, shared, answer)
    run.context_tokens = measured.total
    run.context_dropped = {**shared.dropped, **measured.notes}
    route_record(run, answer.route, primary=config.endpoint)
    if answer.output is None:
        run.raw_output = answer.raw
        run.validation_errors = answer.errors
        run.prompt_tokens = answer.prompt_tokens or None
        run.completion_tokens = answer.completion_tokens or None
        failure = answer.failure or LLMOutputError("no output")
        return _record_failure(run, turn, started, f"{failure.code}: {failure}", attempts=answer.calls)
    run.status = RunStatus.SUCCEEDED
    run.parsed_output = answer.output.model_dump(mode="json")
    _finish_run(run, started, answer.calls, answer.prompt_tokens, answer.completion_tokens, answer.raw, answer.errors)
    progress.agent_status_emit(turn=turn, agent=agent, state="succeeded", ms=run.latency_ms)
    return JsonCallResult(answer.output, run)


@dataclass
class PromptMeasure:
    total: int  # prompt tokens as the agent's model counts them (or the estimate)
    notes: dict[str, Any]  # added to the run's context_dropped: the shared share, any overflow


def measure_prompt(
    config: AgentConfig, messages: list[dict[str, str]], shared: SharedContext, answer: structured.StructuredAnswer
) -> PromptMeasure:
    """Count an agent's prompt as its own model does and compare it with its budget.

    Measured after the call, so it never delays it: the server's own count (usage) when one
    call answered with it, which costs nothing; otherwise the model's tokenizer (cached)."""
    if answer.calls == 1 and answer.prompt_tokens:
        total = answer.prompt_tokens
        shared_tokens = shared.tokens
        own_tokens = max(0, total - shared_tokens - tokens.MESSAGE_OVERHEAD_TOKENS * len(messages))
    else:
        counter = tokens.counter_for(EndpointSpec.from_endpoint(config.endpoint))
        shared_tokens, own_tokens = counter.count_many([messages[0]["content"], messages[1]["content"]])
        total = shared_tokens + own_tokens + tokens.MESSAGE_OVERHEAD_TOKENS * len(messages)
    notes: dict[str, Any] = {"shared_tokens": shared_tokens, "own_tokens": own_tokens}
    if total > config.context_budget:
        # The shared part is cut to budget; only an agent's own part (an operator's long prompt,
        # a large catalog) can overflow. Sent anyway (refusing would lose the turn), and recorded.
        notes["over_budget_by"] = total - config.context_budget
        logger.warning("%s prompt is %s tokens over its budget", config.agent, total - config.context_budget)
    return PromptMeasure(total, notes)


def route_record(run: AgentRun, report: RouteReport, *, primary: ModelEndpoint) -> None:
    """Put what routing did on the run: the endpoint that answered, the primary it replaced,
    and the time spent waiting for slots (saved with the run's end)."""
    run.slot_wait_ms = report.slot_wait_ms
    served = report.served
    if served is not None and served.spec.name != primary.name:
        run.fallback_from = primary
        run.endpoint_id = served.endpoint_id
        run.model_id = served.spec.model_id


# What a run's end writes (its inputs were written when it started): the UPDATE stays small.
FINISHED_RUN_FIELDS = [
    "endpoint",
    "model_id",
    "fallback_from",
    "slot_wait_ms",
    "status",
    "attempts",
    "prompt_tokens",
    "completion_tokens",
    "context_tokens",
    "context_dropped",
    "raw_output",
    "parsed_output",
    "validation_errors",
    "error",
    "finished_at",
    "latency_ms",
]


def _save_run_end(run: AgentRun) -> None:
    """Write a run's end; once more if the connection held through the model call died meanwhile
    (PostgreSQL restarted: a worker's thread keeps its connection for the whole task, see
    settings.database_from_url). Without the second try the agent's answer was lost and its run
    left 'running' for ever. Safe to repeat: an UPDATE of this run's own row."""
    try:
        with bookkeeping_atomic():
            run.save(update_fields=FINISHED_RUN_FIELDS)
    except (OperationalError, InterfaceError):
        if connection.in_atomic_block:
            raise  # an enclosing transaction is broken with it: only its owner can start again
        # The failed transaction's rollback has already swapped the dead connection for one from
        # the pool (checked on loan); if the server is still down, this raises as before.
        logger.warning("%s run %s: database error on writing its end, writing it again", run.agent, run.pk)
        with bookkeeping_atomic():
            run.save(update_fields=FINISHED_RUN_FIELDS)


def _finish_run(
    run: AgentRun,
    started: float,
    attempts: int,
    prompt_tokens: int,
    completion_tokens: int,
    raw: str,
    errors: list[str],
) -> None:
    run.attempts = attempts
    run.prompt_tokens = prompt_tokens or None
    run.completion_tokens = completion_tokens or None
    run.raw_output = raw
    run.validation_errors = errors
    run.finished_at = timezone.now()
    run.latency_ms = int((time.monotonic() - started) * 1000)
    _save_run_end(run)
    metrics.agent_run_recorded(run)


def _record_failure(run: AgentRun, turn: Turn, started: float, error: str, *, attempts: int) -> JsonCallResult:
    run.status = RunStatus.FAILED
    run.error = error[:2000]
    run.attempts = attempts
    run.finished_at = timezone.now()
    run.latency_ms = int((time.monotonic() - started) * 1000)
    _save_run_end(run)
    metrics.agent_run_recorded(run)
    logger.warning("agent %s failed on turn %s: %s", run.agent, turn.pk, error[:300])
    progress.agent_status_emit(turn=turn, agent=run.agent, state="failed", ms=run.latency_ms)
    return JsonCallResult(None, run)


def succeeded_output(turn: Turn, agent: str, round: int = 1) -> AgentOutput | None:
    # Only the parsed output: the row's inputs and raw reply are not needed here.
    parsed = (
        AgentRun.objects.filter(turn=turn, agent=agent, round=round, status=RunStatus.SUCCEEDED)
        .values_list("parsed_output", flat=True)
        .first()
    )
    return OUTPUT_SCHEMAS[agent].model_validate(parsed) if parsed is not None else None


def succeeded_outputs(turn: Turn) -> dict[str, AgentOutput]:
    """Every agent's first-round output of the turn that succeeded, in one query."""
    runs = AgentRun.objects.filter(turn=turn, round=1, status=RunStatus.SUCCEEDED).exclude(agent=Agent.COACH)
    return {
        run.agent: OUTPUT_SCHEMAS[run.agent].model_validate(run.parsed_output)
        for run in runs.only("agent", "parsed_output")
        if run.agent in OUTPUT_SCHEMAS
    }


def output_as(outputs: dict[str, AgentOutput], agent: str, schema: type[OutputT]) -> OutputT | None:
    output = outputs.get(agent)
    return output if isinstance(output, schema) else None
