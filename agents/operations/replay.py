"""Replays: a prompt version run on the stored inputs of past runs of its agent, in-process or as
a background job, and the report that sets each original beside what the version made of it.
Nothing a replay does changes a stored run; each replay is in the audit log."""

from __future__ import annotations

import difflib
import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from celery import current_app
from django.db import models, transaction
from django.db.models import F
from django.utils import timezone
from pydantic import ValidationError

from agents.chat import coach
from agents.llm.client import EndpointSpec, chat_complete
from agents.llm.errors import LLMError
from agents.llm.schema import extra_body_for
from agents.memory.context import SharedContext, agent_messages
from agents.models import (
    Agent,
    AgentConfig,
    AgentRun,
    EvaluationSet,
    PromptVersion,
    ReplayJob,
    ReplayJobResult,
    ReplayStatus,
    RunStatus,
)
from agents.operations.audit import User, audit
from agents.operations.errors import PromptOpError, short_error
from agents.pipeline import reply_gate
from agents.pipeline.replay import UntrustedEndpointError, agent_run_replay
from agents.prompts import render_prompt
from agents.roles import structured, turn_setup
from agents.roles.schemas import OUTPUT_SCHEMAS
from agents.safety import quality
from agents.selectors import turn_number

# A replay's bounds. In the background (a Celery task) each run gets its own limit: one agent call
# on the CPU build of vLLM takes up to a minute or two. In-process (prompt_replay) one limit for all.
REPLAY_MAX_RUNS = 20
REPLAY_RUN_TIMEOUT_S = 180.0
REPLAY_TOTAL_TIMEOUT_S = 90.0
REPLAY_TASK = "coaching.prompt_replay"  # queued by name: this module does not import the tasks
MAX_SHOWN_CHARS = 4000

logger = logging.getLogger(__name__)


def pretty(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def schema_ordered(agent: str, data: Any) -> Any:
    """An output with its fields in the schema's order, as the agent was asked for them (JSONB
    stores keys in its own order), so the original and the new one line up field by field."""
    schema = OUTPUT_SCHEMAS.get(agent)
    if schema is None or not isinstance(data, dict):
        return data
    try:
        return schema.model_validate(data).model_dump(mode="json")
    except ValidationError:
        return data


def clipped(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters)"


@dataclass(frozen=True)
class FieldRow:
    name: str
    original: str
    new: str
    changed: bool

    def _marked(self) -> tuple[list[tuple[str, bool]], list[tuple[str, bool]]]:
        old_lines, new_lines = self.original.splitlines(), self.new.splitlines()
        old_marks, new_marks = [False] * len(old_lines), [False] * len(new_lines)
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old_lines, b=new_lines).get_opcodes():
            if tag != "equal":
                old_marks[i1:i2] = [True] * (i2 - i1)
                new_marks[j1:j2] = [True] * (j2 - j1)
        return list(zip(old_lines, old_marks, strict=True)), list(zip(new_lines, new_marks, strict=True))

    @property
    def original_lines(self) -> list[tuple[str, bool]]:
        """The original value's lines, each marked when it differs from the new value."""
        return self._marked()[0]

    @property
    def new_lines(self) -> list[tuple[str, bool]]:
        return self._marked()[1]


@dataclass
class ReplayRow:
    """One stored run and what the draft made of the same inputs. Only agent outputs are kept
    here: never the shared prompt (the coachee's conversation)."""

    run_id: int
    turn_id: int
    round: int
    run_started_at: Any
    original_version: int | None
    original_status: str
    original_output: Any
    original_raw: str
    original_errors: list[str]
    original_error: str
    original_prompt_tokens: int | None
    original_completion_tokens: int | None
    original_latency_ms: int | None
    ran: bool = False
    valid: bool = False
    new_output: Any = None
    new_raw: str = ""
    new_errors: list[str] = field(default_factory=list)
    new_failure: str = ""
    new_prompt_tokens: int | None = None
    new_completion_tokens: int | None = None
    new_latency_ms: int | None = None
    turn_number: int | None = None  # in its session: what the operator reads, not the id
    calls: int = 0

    @property
    def text_reply(self) -> bool:
        """Coach's: a reply in words, shown side by side rather than field by field."""
        return isinstance(self.original_output, str) or isinstance(self.new_output, str)

    @property
    def original_pretty(self) -> str:
        return clipped(pretty(self.original_output) or self.original_raw)

    @property
    def new_pretty(self) -> str:
        return clipped(pretty(self.new_output))

    @property
    def new_raw_clipped(self) -> str:
        return clipped(self.new_raw)

    @property
    def fields(self) -> list[FieldRow]:
        """Top-level fields side by side, so a change of strategy or escalation stands out."""
        old = self.original_output if isinstance(self.original_output, dict) else {}
        new = self.new_output if isinstance(self.new_output, dict) else {}
        names = list(old) + [name for name in new if name not in old]
        return [
            FieldRow(
                name, clipped(pretty(old.get(name))), clipped(pretty(new.get(name))), old.get(name) != new.get(name)
            )
            for name in names
        ]

    @property
    def changed(self) -> bool:
        return self.valid and self.new_output != self.original_output


@dataclass
class ReplayReport:
    version_id: int
    agent: str
    version: int
    status: str
    rows: list[ReplayRow]
    elapsed_ms: int

    @property
    def valid_count(self) -> int:
        return sum(row.valid for row in self.rows)

    @property
    def ran_count(self) -> int:
        return sum(row.ran for row in self.rows)

    @property
    def changed_count(self) -> int:
        return sum(row.changed for row in self.rows)

    @property
    def summary(self) -> str:
        return (
            f"{self.ran_count} of {len(self.rows)} runs replayed, {self.valid_count} validated, "
            f"{self.changed_count} gave a different output"
        )


def replay_candidates(agent: str, *, limit: int = 20) -> models.QuerySet[AgentRun]:
    """The most recent finished runs of an agent that stored what a replay needs."""
    return (
        AgentRun.objects.filter(agent=agent)
        .exclude(status=RunStatus.RUNNING)
        .exclude(turn__shared_prompt="")
        .select_related("prompt_version")
        .only(
            "pk",
            "turn_id",
            "agent",
            "round",
            "status",
            "started_at",
            "latency_ms",
            "prompt_tokens",
            "completion_tokens",
            "prompt_version__version",
            "prompt_version__status",
            "prompt_version__agent",
        )
        .annotate(turn_number=turn_number("turn__"))
        .order_by("-started_at", "-pk")[:limit]
    )


def _row_for(run: AgentRun) -> ReplayRow:
    return ReplayRow(
        run_id=run.pk,
        turn_id=run.turn_id,
        turn_number=getattr(run, "turn_number", None),
        round=run.round,
        run_started_at=run.started_at,
        original_version=run.prompt_version.version if run.prompt_version else None,
        original_status=run.status,
        # Coach's output is the text it streamed; the JSON agents' their parsed answer.
        original_output=run.raw_output if run.agent == Agent.COACH else schema_ordered(run.agent, run.parsed_output),
        original_raw=run.raw_output,
        original_errors=list(run.validation_errors or []),
        original_error=run.error,
        original_prompt_tokens=run.prompt_tokens,
        original_completion_tokens=run.completion_tokens,
        original_latency_ms=run.latency_ms,
    )


def _runs_by_id(run_ids: Iterable[int]) -> dict[int, AgentRun]:
    """Runs as a replay reads them, each with its turn's number in the session (what people read)."""
    runs = AgentRun.objects.select_related("turn", "prompt_version").annotate(turn_number=turn_number("turn__"))
    return dict(runs.in_bulk(list(run_ids)))


def replayable(agent: str) -> bool:
    """The JSON agents, and Coach (its reply as the coachee would have read it)."""
    return agent in OUTPUT_SCHEMAS or agent == Agent.COACH


def _replayable_runs(version: PromptVersion, run_ids: Sequence[int]) -> list[AgentRun]:
    """The runs `version` may be replayed on, in the order given; PromptOpError says why not."""
    if not replayable(version.agent):
        raise PromptOpError(f"{version.agent} is not an agent that can be replayed")
    if not run_ids:
        raise PromptOpError("choose at least one past run to replay on")
    if len(run_ids) > REPLAY_MAX_RUNS:
        raise PromptOpError(f"choose at most {REPLAY_MAX_RUNS} runs")
    loaded = _runs_by_id(run_ids)
    others = sorted(run.pk for run in loaded.values() if run.agent != version.agent)
    if others:
        raise PromptOpError(f"runs {others} are not {version.agent} runs")
    config = AgentConfig.objects.select_related("endpoint").filter(agent=version.agent).first()
    if config is None:
        raise PromptOpError(f"{version.agent} has no configuration")
    if not config.endpoint.trusted_for_coachee_data:
        raise PromptOpError(
            f"not replayed: {version.agent}'s endpoint {config.endpoint.name} is not marked trusted for coachee "
            "data, and a replay sends the coachee's stored prompt to it; a platform administrator decides that"
        )
    return [loaded[run_id] for run_id in run_ids if run_id in loaded]


def replay_one(version: PromptVersion, run: AgentRun, *, timeout_s: float) -> ReplayRow:
    """`version` on one stored run's inputs (pipeline.replay.agent_run_replay); writes nothing."""
    row = _row_for(run)
    if timeout_s < structured.MIN_CALL_SECONDS:
        row.new_failure = "not run: the replay's time limit was reached"
        return row
    if run.agent == Agent.COACH:
        return _coach_replay(version, run, row, timeout_s=timeout_s)
    try:
        result = agent_run_replay(run=run, prompt_body=version.body, timeout_s=timeout_s)
    except (KeyError, ValueError, AgentConfig.DoesNotExist) as exc:
        row.new_failure = f"cannot be replayed: {exc}"
        return row
    answer = result.answer
    row.ran = True
    row.valid = result.valid
    row.new_output = answer.output.model_dump(mode="json") if answer.output is not None else None
    row.new_raw = answer.raw
    row.new_errors = list(answer.errors)
    row.new_failure = f"{answer.failure.code}: {answer.failure}" if answer.failure is not None else ""
    row.new_prompt_tokens = answer.prompt_tokens or None
    row.new_completion_tokens = answer.completion_tokens or None
    row.new_latency_ms = result.latency_ms
    row.calls = answer.calls
    return row


def _coach_replay(version: PromptVersion, run: AgentRun, row: ReplayRow, *, timeout_s: float) -> ReplayRow:
    """Coach's draft on a stored turn: the same shared prompt and values, one completion (the text
    it would have streamed), checked by the same quality gate as a live reply ("validated": it
    would have reached the coachee)."""
    turn = run.turn
    if not turn.shared_prompt:
        row.new_failure = "cannot be replayed: this turn predates stored prompts"
        return row
    config = AgentConfig.objects.select_related("endpoint").get(agent=Agent.COACH)
    if not config.endpoint.trusted_for_coachee_data:  # checked again here: trust may change after queuing
        row.new_failure = f"cannot be replayed: {UntrustedEndpointError(config.endpoint.name)}"
        return row
    spec = EndpointSpec.from_endpoint(config.endpoint)
    shared = SharedContext(text=turn.shared_prompt, tokens=0, message_ids=[])
    messages = agent_messages(shared, render_prompt(version.body, run.prompt_values))
    started = time.monotonic()
    row.ran, row.calls = True, 1
    try:
        completion = chat_complete(
            spec,
            messages,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            extra_body=extra_body_for(spec.kind, thinking=config.thinking),
            headers={"X-Coaching-Agent": Agent.COACH},
            timeout_s=timeout_s,
        )
    except LLMError as exc:
        row.new_failure = f"{exc.code}: {exc}"
        return row
    row.new_latency_ms = int((time.monotonic() - started) * 1000)
    row.new_output = row.new_raw = completion.content
    row.new_prompt_tokens, row.new_completion_tokens = completion.prompt_tokens, completion.completion_tokens
    expect = reply_gate.expectations_for(
        turn,
        wording=[message["content"] for message in messages],
        blocked=coach.previous_blocked_moves(turn),
        catalog=turn_setup.move_catalog(),
    )
    row.new_errors = [str(finding) for finding in quality.reply_findings(completion.content, expect)]
    row.valid = bool(completion.content.strip()) and not row.new_errors
    return row


def _audit_replay(user: User | None, version: PromptVersion, report: ReplayReport) -> None:
    turns = ", ".join(str(row.turn_id) for row in report.rows)
    message = f"Replayed v{version.version} on {len(report.rows)} past runs (turns {turns}): {report.summary}."
    audit(user, version, message)


def prompt_replay(
    *,
    version: PromptVersion,
    runs: Sequence[AgentRun],
    user: User | None = None,
    total_timeout_s: float = REPLAY_TOTAL_TIMEOUT_S,
) -> ReplayReport:
    """Run `version` on the stored inputs of each run, through the agent's configured endpoint,
    within one overall time limit, here and now (the admin queues a ReplayJob instead). Writes no
    AgentRun: the stored runs stay the originals to compare with. Recorded in the audit log."""
    started = time.monotonic()
    rows = [
        replay_one(version, run, timeout_s=total_timeout_s - (time.monotonic() - started))
        for run in _replayable_runs(version, [run.pk for run in runs])
    ]
    report = ReplayReport(
        version.pk, version.agent, version.version, version.status, rows, int((time.monotonic() - started) * 1000)
    )
    _audit_replay(user, version, report)
    return report


def replay_job_start(
    *,
    version: PromptVersion,
    run_ids: Sequence[int],
    user: User | None,
    evaluation_set: EvaluationSet | None = None,
) -> ReplayJob:
    """Check the replay can run, store it as a job and queue its task once this is committed."""
    runs = _replayable_runs(version, run_ids)
    job = ReplayJob.objects.create(
        version=version,
        requested_by_id=getattr(user, "pk", None),
        evaluation_set=evaluation_set,
        run_ids=[r.pk for r in runs],
    )
    # The task's own limits grow with its runs: each has REPLAY_RUN_TIMEOUT_S.
    soft_limit = int(len(runs) * REPLAY_RUN_TIMEOUT_S) + 30
    transaction.on_commit(
        lambda: current_app.send_task(
            REPLAY_TASK, args=[job.pk], soft_time_limit=soft_limit, time_limit=soft_limit + 30
        )
    )
    return job


def replay_job_run(job_id: int) -> None:
    """The replay task's work: each run in turn, its result stored as it finishes (the page shows
    the progress), each within REPLAY_RUN_TIMEOUT_S. Runs once per job."""
    claimed = ReplayJob.objects.filter(pk=job_id, status=ReplayStatus.QUEUED).update(
        status=ReplayStatus.RUNNING, started_at=timezone.now()
    )
    if not claimed:  # a redelivered task: the first delivery has it
        return
    job = ReplayJob.objects.select_related("version", "requested_by").get(pk=job_id)
    try:
        runs = _runs_by_id(job.run_ids)
        for run_id in job.run_ids:
            run = runs.get(run_id)
            if run is not None:  # erased since it was chosen
                row = replay_one(job.version, run, timeout_s=REPLAY_RUN_TIMEOUT_S)
                ReplayJobResult.objects.create(
                    job=job,
                    run=run,
                    ran=row.ran,
                    valid=row.valid,
                    output=row.new_output,
                    raw_output=row.new_raw,
                    errors=row.new_errors,
                    failure=row.new_failure,
                    prompt_tokens=row.new_prompt_tokens,
                    completion_tokens=row.new_completion_tokens,
                    latency_ms=row.new_latency_ms,
                    calls=row.calls,
                )
            ReplayJob.objects.filter(pk=job_id).update(done=F("done") + 1)
    except Exception as exc:
        ReplayJob.objects.filter(pk=job_id).update(
            status=ReplayStatus.FAILED, error=short_error(exc), finished_at=timezone.now()
        )
        raise
    ReplayJob.objects.filter(pk=job_id).update(status=ReplayStatus.DONE, finished_at=timezone.now())
    try:
        with transaction.atomic():
            _audit_replay(job.requested_by, job.version, replay_job_report(job))
    except Exception:  # the results are stored: a missing log line must not fail the replay
        logger.exception("replay job %s finished but could not be written to the admin log", job_id)


def replay_job_report(job: ReplayJob) -> ReplayReport:
    """The stored results as the replay page shows them, the originals read from their runs."""
    rows = []
    results = list(job.results.order_by("pk"))
    runs = _runs_by_id(result.run_id for result in results)
    for result in results:
        row = _row_for(runs[result.run_id])
        row.ran, row.valid, row.calls = result.ran, result.valid, result.calls
        # jsonb keeps no key order: the schema's order again, as the original is shown.
        row.new_output = schema_ordered(job.version.agent, result.output)
        row.new_raw, row.new_errors = result.raw_output, list(result.errors)
        row.new_failure = result.failure
        row.new_prompt_tokens, row.new_completion_tokens = result.prompt_tokens, result.completion_tokens
        row.new_latency_ms = result.latency_ms
        rows.append(row)
    version = job.version
    elapsed = job.finished_at - job.started_at if job.finished_at and job.started_at else None
    return ReplayReport(
        version.pk,
        version.agent,
        version.version,
        version.status,
        rows,
        int(elapsed.total_seconds() * 1000) if elapsed else 0,
    )
