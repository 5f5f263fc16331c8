"""The turn's agents, stage by stage: what runs, with what input, and what happens on failure.

    coach (ASGI, streamed)  ─┐
    shadow ──> persona | plasticity | stability ──> arbitration ──> synth ──> critic gate ──> deliver

Celery tasks (tasks.py) call the *_step functions; each is idempotent per (turn, agent):
a run that already ended is returned as it is. Agents never raise into the canvas: a
failure is recorded on the AgentRun and the turn goes on without that agent (degraded).
Running one agent and recording its AgentRun is runner.py; Synth's brief is brief.py; the
critic gate on its reply is critic_gate.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.db import IntegrityError
from django.utils import timezone

from agents import selectors
from agents.memory import blackboard, edits, predictions
from agents.memory.context import fence
from agents.models import SPECIALISTS, Agent, AgentRun, BlackboardVersion, Message, MessageStatus, QualityFinding, Turn
from agents.pipeline import reply_gate
from agents.pipeline.brief import arbitration_for, specialists_text
from agents.pipeline.critic_gate import critic_gate
from agents.pipeline.runner import (
    catalog_text,
    instructions_for,
    load_turn,
    run_json_agent,
    stage_deadline,
    succeeded_output,
    succeeded_outputs,
    turn_shared_context,
)
from agents.roles import turn_setup
from agents.roles.arbitration import render_brief
from agents.roles.schemas import ShadowOutput, SynthOutput
from agents.safety import quality
from agents.transactions import bookkeeping_atomic
from agents.turns import finish


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
