"""The turn's agents, stage by stage: what runs, with what input, and what happens on failure.

    coach (ASGI, streamed)  ─┐
    shadow ──> persona | plasticity | stability ──> arbitration ──> synth ──> critic gate ──> deliver

Celery tasks (tasks.py) call the *_step functions; each is idempotent per (turn, agent):
a run that already ended is returned as it is. Agents never raise into the canvas: a
failure is recorded on the AgentRun and the turn goes on without that agent (degraded).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from django.db import IntegrityError, InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from agents import selectors
from agents.llm.client import EndpointSpec
from agents.llm.errors import LLMOutputError
from agents.llm.routing import RouteReport
from agents.memory import blackboard, edits, predictions, tokens
from agents.memory.context import (
    TURN_PREFIX_FIELDS,
    SharedContext,
    agent_messages,
    build_shared_context,
    fence,
    prefix_counter,
    shared_budget,
)
from agents.models import (
    SPECIALISTS,
    Agent,
    AgentConfig,
    AgentRun,
    BlackboardVersion,
    Conflict,
    Escalation,
    Message,
    MessageStatus,
    ModelEndpoint,
    QualityFinding,
    RunStatus,
    Turn,
)
from agents.observability import metrics, tracing
from agents.pipeline import reply_gate
from agents.prompts import render_prompt
from agents.roles import structured, turn_setup
from agents.roles.arbitration import Arbitration, MoveInfo, arbitrate, arbitrate_crisis, render_brief
from agents.roles.schemas import (
    OUTPUT_SCHEMAS,
    AgentOutput,
    CriticOutput,
    PersonaOutput,
    PlasticityOutput,
    ShadowOutput,
    StabilityOutput,
    SynthOutput,
)
from agents.safety import pregate, quality
from agents.transactions import bookkeeping_atomic
from agents.turns import crisis, finish, progress, summaries

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


# --- Stages ------------------------------------------------------------------------------


def shadow_step(*, turn_id: int) -> str:
    """Shadow's run, then its blackboard write and the predictions it resolves."""
    turn = turn_setup.running_turn(turn_id, load_turn)
    if turn is None:
        return "skipped"
    # Predictions from earlier sessions that the coachee may now report on (Shadow's own part).
    open_predictions = predictions.open_for_resolution(turn=turn)
    shared = turn_shared_context(turn)
    turn_setup.turn_remember(turn)  # the trio reads the same row, prefix included
    result = run_json_agent(
        turn=turn,
        agent=Agent.SHADOW,
        shared=shared,
        values={},
        enums={"message_ids": shared.message_ids, "open_predictions": [p.pk for p in open_predictions]},
        deadline=stage_deadline(turn, "shadow"),
        extra_instructions=predictions.resolution_instructions(open_predictions),
    )
    if isinstance(result.output, ShadowOutput):
        turn_setup.output_remember(turn.pk, Agent.SHADOW, result.output)  # for the trio, if here
        blackboard_write(turn=turn, shadow=result.output, run=result.run)
        predictions.ledger_record(turn=turn, shadow=result.output, run=result.run)
        predictions.resolutions_apply(turn=turn, shadow=result.output)
    return result.run.status


def blackboard_write(*, turn: Turn, shadow: ShadowOutput, run: AgentRun) -> BlackboardVersion | None:
    """Merge Shadow's findings into a new blackboard version (for the coachee's later turns)."""
    coachee_id = turn.session.coachee_id
    instructions = turn_setup.setup_for(turn.pk).prompt(Agent.SHADOW).body
    shadow = reply_gate.memory_cleaned(turn_id=turn.pk, shadow=shadow, wording=[turn.shared_prompt, instructions])
    try:
        # Bookkeeping: derived from Shadow's run.
        with bookkeeping_atomic():
            latest = edits.blackboard_lock_latest(coachee_id=coachee_id)
            data = blackboard.merge_shadow(
                latest.data if latest else blackboard.empty(),
                shadow,
                turn_id=turn.pk,
                at=timezone.now().isoformat(),
                agent=Agent.SHADOW,
                prompt_version=run.prompt_version.version if run.prompt_version else None,
            )
            return BlackboardVersion.objects.create(
                coachee_id=coachee_id,
                version=(latest.version + 1) if latest else 1,
                data=data,
                source_turn=turn,
                source_agent=Agent.SHADOW,
                prompt_version=run.prompt_version,
            )
    except IntegrityError:
        # This turn's Shadow already wrote (a redelivered task): nothing to add.
        return None


def shadow_findings_text(turn: Turn) -> str:
    shadow = turn_setup.output_for(turn.pk, Agent.SHADOW) or succeeded_output(turn, Agent.SHADOW)
    if not isinstance(shadow, ShadowOutput):
        return "Shadow's findings for this message: (not available)"
    return "\n".join(
        [
            "Shadow's findings for this message:",
            "<<<data",
            fence(shadow.model_dump_json()),
            "data>>>",
        ]
    )


def latest_persona_profile(turn: Turn) -> str:
    persona = selectors.previous_output(coachee_id=turn.session.coachee_id, agent=Agent.PERSONA, before=turn.started_at)
    if persona is None:
        return "(none yet)"
    ocean = persona.get("ocean", {})
    return ", ".join(f"{trait} {score['score']}±{score['uncertainty']}" for trait, score in ocean.items())


def specialist_step(*, turn_id: int, agent: str) -> str:
    """One specialist's run, with Shadow's findings when Shadow succeeded."""
    if agent not in SPECIALISTS:
        raise ValueError(f"{agent} is not a specialist")
    turn = turn_setup.running_turn(turn_id, load_turn)  # kept by Shadow when it ran in this process
    if turn is None:
        return "skipped"
    shared = turn_shared_context(turn)
    catalog = turn_setup.setup_for(turn.pk).catalog
    values: dict[str, str] = {}
    if agent == Agent.PLASTICITY:
        values = {"moves": catalog_text(catalog), "persona_profile": latest_persona_profile(turn)}
    elif agent == Agent.STABILITY:
        values = {"moves": catalog_text(catalog)}
    enums: dict[str, list[Any]] = {"message_ids": shared.message_ids, "moves": list(catalog)}
    result = run_json_agent(
        turn=turn,
        agent=agent,
        shared=shared,
        values=values,
        enums=enums,
        deadline=stage_deadline(turn, "specialists"),
        extra_instructions=shadow_findings_text(turn),
    )
    if result.output is not None:
        turn_setup.output_remember(turn.pk, agent, result.output)  # for Synth, if here
    return result.run.status


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
        result = arbitrate_crisis(result)
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
    violations += [f"contains {kind.replace('_', ' ')} (safety check)" for kind in pregate.unsafe_content(synth.reply)]
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


def coach_reply_text(turn_id: int) -> str:
    """Coach's reply as it stands now (it may have finished after the turn row was read)."""
    found = Message.objects.filter(turn_as_coach__pk=turn_id).values_list("text", "status").first()
    if found is None or not found[0]:
        return "(not finished)"
    if found[1] == MessageStatus.WITHDRAWN:
        return "(none: it failed the quality check; write the whole answer yourself)"
    if found[1] == MessageStatus.FAILED:
        # The coachee saw these words and then an error: Synth completes the thought.
        return f"{found[0]} (cut off here: the model failed mid-reply)"
    return str(found[0])


def synth_step(*, turn_id: int) -> str:
    """Arbitration over what Shadow and the three specialists produced, Synth, the critic gate
    and delivery."""
    # The row kept by Shadow's step when it ran in this process.
    turn = turn_setup.running_turn(turn_id, load_turn)
    if turn is None:
        return "skipped"
    shared = turn_shared_context(turn)
    catalog = turn_setup.setup_for(turn.pk).catalog
    # Kept by the steps that produced them when they ran in this process; else all from the database.
    outputs = turn_setup.outputs_for(turn.pk)
    if len(outputs) < 1 + len(SPECIALISTS):
        outputs = succeeded_outputs(turn)
    arbitration = arbitration_for(turn, catalog, outputs)
    brief = arbitration.brief
    coach_reply = coach_reply_text(turn.pk)
    values = {
        "brief": render_brief(brief, catalog),
        "coach_reply": "<<<data\n" + fence(coach_reply) + "\ndata>>>",
        "specialists": specialists_text(outputs),
    }
    enums: dict[str, list[Any]] = {"moves": list(brief["allowed_moves"])}
    missing = list(brief["missing"])
    flag_reason = ""
    reply: str | None = None
    extra = ""
    critic_failed = False
    critic_results: dict[str, Any] = {}  # stored with the delivery, in its transaction
    prompt = turn_setup.setup_for(turn.pk).prompt(Agent.SYNTH)
    expect = reply_gate.expectations_for(turn, wording=[shared.text], blocked=brief["blocked_moves"], catalog=catalog)
    for round in (1, 2):
        result = run_json_agent(
            turn=turn,
            agent=Agent.SYNTH,
            shared=shared,
            values=values,
            enums=enums,
            deadline=stage_deadline(turn, "synth"),
            round=round,
            extra_instructions=extra,
        )
        if not isinstance(result.output, SynthOutput):
            missing.append("synth")
            flag_reason = "synth failed"
            break
        verdict = critic_gate(turn=turn, shared=shared, synth=result.output, brief=brief, catalog=catalog, round=round)
        # Rendered again (it succeeded in run_json_agent): the wording the reply must not echo.
        instructions = instructions_for(prompt.body, values, extra)
        findings = quality.reply_findings(
            result.output.reply, replace(expect, wording=expect.wording + reply_gate.system_wording([instructions]))
        )
        violations = verdict.violations + [str(f) for f in findings]
        critic_failed = critic_failed or not verdict.critic_ok
        critic_results[f"round_{round}"] = {
            "passed": verdict.passed and not findings,
            "violations": violations,
            "critic_ok": verdict.critic_ok,
        }
        reply_gate.findings_record(
            turn_id=turn.pk,
            surface=QualityFinding.Surface.SYNTH,
            findings=findings,
            action=QualityFinding.Action.REGENERATED if round == 1 else QualityFinding.Action.FALLBACK,
            round=round,
        )
        if verdict.passed and not findings:
            reply = result.output.reply
            if not verdict.critic_ok:
                flag_reason = "critic unavailable; reply unchecked"
            break
        flag_reason = "quality gate: " + "; ".join(violations)[:180]
        extra = (
            "Your previous reply was rejected: "
            + "; ".join(violations)
            + ". Write it again without any of that: plain sentences to the coachee, in their language."
        )
    if critic_failed:
        missing.append("critic")
    delivered = finish.turn_finish(
        turn_id=turn.pk,
        reply=reply if reply is not None else finish.fallback_reply(expect.languages),
        fallback=reply is None,
        degraded=bool(missing) or reply is None,
        flag_reason=flag_reason,
        missing=missing,
        critic_result=critic_results,
    )
    if not delivered and critic_results:
        # The turn ended meanwhile (its deadline): the gate's record is kept all the same.
        with bookkeeping_atomic():
            Turn.objects.filter(pk=turn.pk).update(critic_result=critic_results)
    turn_setup.forget(turn.pk)
    return "delivered" if delivered else "stale"
