"""What operators do to configuration: prompt drafts, activation and rollback, diffs, replays of a
draft on stored runs, and the model endpoint connection test. Every change is written to Django
admin's LogEntry (who, what, when), so the admin's history pages are the audit trail.

Prompt versions are immutable once created: editing any version (active, retired or draft)
creates a new draft, so every text that ever ran, or was replayed, stays on record.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
from celery import current_app
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import IntegrityError, models, transaction
from django.db.models import F, Max
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

from agents.chat import coach
from agents.llm.client import EndpointSpec, chat_complete, list_models
from agents.llm.errors import LLMError, LLMTransientError
from agents.llm.schema import extra_body_for
from agents.memory.context import SharedContext, agent_messages
from agents.models import (
    Agent,
    AgentConfig,
    AgentRun,
    EndpointKind,
    EvaluationSet,
    ModelEndpoint,
    PromptStatus,
    PromptVersion,
    ReplayJob,
    ReplayJobResult,
    ReplayStatus,
    RunStatus,
)
from agents.pipeline import reply_gate, steps
from agents.prompts import PLACEHOLDERS, placeholders_in, render_prompt
from agents.roles import structured, turn_setup
from agents.roles.schemas import OUTPUT_SCHEMAS
from agents.safety import quality
from agents.selectors import turn_number

User = AbstractBaseUser | AnonymousUser

# A replay's bounds. In the background (a Celery task) each run gets its own limit: one agent call
# on the CPU build of vLLM takes up to a minute or two. In-process (prompt_replay) one limit for all.
REPLAY_MAX_RUNS = 20
REPLAY_RUN_TIMEOUT_S = 180.0
REPLAY_TOTAL_TIMEOUT_S = 90.0
REPLAY_TASK = "coaching.prompt_replay"  # queued by name: this module does not import the tasks
# The connection test must answer quickly even when the server does not.
TEST_CONNECT_TIMEOUT_S = 3.0
TEST_LIST_TIMEOUT_S = 5.0
TEST_COMPLETION_TIMEOUT_S = 15.0
TEST_METRICS_TIMEOUT_S = 2.0
TEST_PROMPT = [{"role": "user", "content": "Reply with the single word: ready"}]
TEST_MAX_TOKENS = 8
MAX_SHOWN_CHARS = 4000


logger = logging.getLogger(__name__)


class PromptOpError(Exception):
    """An operator action that cannot be done, with a message fit to show them."""


# --- Audit ------------------------------------------------------------------------------


def person_id(user: User | None) -> int | None:
    """The id of a logged-in person, or None (a shell, a migration, an anonymous request)."""
    if user is None or not user.is_authenticated or user.pk is None:
        return None
    return int(user.pk)


def audit(user: User | None, obj: models.Model, message: str, *, action_flag: int = CHANGE) -> LogEntry | None:
    """One LogEntry (who, which object, when, what) for an action that is not a plain admin save."""
    uid = person_id(user)
    if uid is None:
        return None  # a shell or migration: no person to record
    entry = LogEntry.objects.log_actions(
        user_id=uid, queryset=[obj], action_flag=action_flag, change_message=message, single_object=True
    )
    return entry if isinstance(entry, LogEntry) else None


# --- Placeholders -----------------------------------------------------------------------


def _names(names: Iterable[str]) -> str:
    return ", ".join(f"${{{name}}}" for name in sorted(names)) or "none"


def prompt_body_errors(agent: str, body: str) -> list[str]:
    """Why a body cannot be a prompt of this agent (empty when it can)."""
    if agent not in PLACEHOLDERS:
        return [f"unknown agent {agent!r}"]
    if not body.strip():
        return ["the prompt is empty"]
    try:
        used = placeholders_in(body)
    except ValueError as exc:
        return [str(exc)]
    unknown = used - PLACEHOLDERS[agent]
    if unknown:
        return [f"{agent} cannot be given {_names(unknown)}; it can be given: {_names(PLACEHOLDERS[agent])}"]
    return []


def prompt_body_warnings(agent: str, body: str) -> list[str]:
    """Inputs the agent is given that this body leaves out: allowed, but usually a mistake."""
    try:
        unused = PLACEHOLDERS.get(agent, frozenset()) - placeholders_in(body)
    except ValueError:
        return []
    return [f"the prompt does not use {_names([name])}, so the agent will not see it" for name in sorted(unused)]


# --- Drafts, activation, rollback --------------------------------------------------------


def prompt_draft_create(
    *, agent: str, body: str, user: User | None, based_on: PromptVersion | None = None
) -> PromptVersion:
    """A new draft version of an agent's prompt. The placeholders are checked against what the
    agent can be given. No existing version is modified: an edit of any version is a new draft."""
    errors = prompt_body_errors(agent, body)
    if errors:
        raise PromptOpError("; ".join(errors))
    if based_on is not None and based_on.agent != agent:
        raise PromptOpError(f"v{based_on.version} is a prompt of {based_on.agent}, not {agent}")
    for _ in range(3):
        try:
            with transaction.atomic():
                # Serialise version numbers per agent: lock its rows, then read the highest
                # number in a new statement (which sees what a concurrent creator committed).
                list(PromptVersion.objects.select_for_update().filter(agent=agent).values_list("pk", flat=True))
                highest = PromptVersion.objects.filter(agent=agent).aggregate(m=Max("version"))["m"] or 0
                draft = PromptVersion.objects.create(
                    agent=agent,
                    version=highest + 1,
                    body=body,
                    status=PromptStatus.DRAFT,
                    created_by_id=person_id(user),
                )
                origin = f" from v{based_on.version} ({based_on.status})" if based_on is not None else ""
                audit(user, draft, f"Created draft v{draft.version}{origin}.", action_flag=ADDITION)
                return draft
        except IntegrityError:
            continue  # another draft took the number first (no rows to lock yet): take the next
    raise PromptOpError("could not number the new draft; try again")


def active_version(agent: str) -> PromptVersion | None:
    return PromptVersion.objects.filter(agent=agent, status=PromptStatus.ACTIVE).first()


def _lock_agent_versions(agent: str) -> None:
    list(PromptVersion.objects.select_for_update().filter(agent=agent).values_list("pk", flat=True))


def prompt_version_activate(*, version: PromptVersion, user: User | None) -> PromptVersion:
    """Make `version` the agent's active prompt, atomically: the current active one is retired
    first (one active version per agent is a partial unique constraint), then this one is
    activated and who did it, and when, recorded. The next run of the agent uses it."""
    with transaction.atomic():
        _lock_agent_versions(version.agent)
        version.refresh_from_db()
        if version.status == PromptStatus.ACTIVE:
            raise PromptOpError(f"{version.agent} v{version.version} is already active")
        errors = prompt_body_errors(version.agent, version.body)
        if errors:
            raise PromptOpError(f"v{version.version} cannot be activated: {'; '.join(errors)}")
        previous = _switch_active(version, user=user, retired_note=f"Retired: v{version.version} was activated.")
        replaced = f" (replacing v{previous.version})" if previous is not None else ""
        audit(user, version, f"Activated v{version.version}{replaced}.")
    return version


def _switch_active(target: PromptVersion, *, user: User | None, retired_note: str) -> PromptVersion | None:
    """Retire the agent's active version (first: one active per agent is a constraint), then
    activate `target`; returns the retired version. Call under _lock_agent_versions."""
    previous = active_version(target.agent)
    if previous is not None:
        PromptVersion.objects.filter(pk=previous.pk).update(status=PromptStatus.RETIRED)
        previous.status = PromptStatus.RETIRED
        audit(user, previous, retired_note)
    target.status = PromptStatus.ACTIVE
    target.activated_at = timezone.now()
    target.activated_by_id = person_id(user)
    target.save(update_fields=["status", "activated_at", "activated_by"])
    return previous


def rollback_target(agent: str) -> PromptVersion | None:
    """The version that was active before the current one: the retired version activated most
    recently (versions seeded active have no activation time and come last, newest first)."""
    current = active_version(agent)
    retired = PromptVersion.objects.filter(agent=agent, status=PromptStatus.RETIRED)
    if current is not None:
        retired = retired.exclude(pk=current.pk)
    return retired.order_by(F("activated_at").desc(nulls_last=True), "-version").first()


def prompt_version_rollback(*, agent: str, user: User | None) -> PromptVersion:
    """Re-activate the version that was active before the current one."""
    with transaction.atomic():
        _lock_agent_versions(agent)
        target = rollback_target(agent)
        if target is None:
            raise PromptOpError(f"{agent} has no earlier active version to roll back to")
        current = _switch_active(target, user=user, retired_note=f"Retired by a rollback to v{target.version}.")
        replaced = f" v{current.version}" if current is not None else " nothing"
        audit(user, target, f"Rolled back to v{target.version}: it replaces{replaced}.")
    return target


# --- Diff ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "hunk", "add", "del", "same"
    text: str
    old_no: int | None = None
    new_no: int | None = None

    @property
    def sign(self) -> str:
        return {"add": "+", "del": "-", "same": " "}.get(self.kind, "")


@dataclass(frozen=True)
class PromptDiff:
    old_label: str
    new_label: str
    lines: list[DiffLine]
    added: int
    removed: int

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)

    @property
    def html(self) -> SafeString:
        """The diff as table rows; every piece of prompt text is escaped."""
        if not self.lines:
            return format_html('<tr class="diff-same"><td colspan="4">{}</td></tr>', "The texts are identical.")
        return format_html_join(
            "\n",
            '<tr class="diff-{}"><td class="ln">{}</td><td class="ln">{}</td><td class="sign">{}</td>'
            '<td class="txt">{}</td></tr>',
            ((line.kind, line.old_no or "", line.new_no or "", line.sign, line.text) for line in self.lines),
        )


def body_diff(old: str, new: str, *, old_label: str = "old", new_label: str = "new", context: int = 3) -> PromptDiff:
    """A unified diff of two prompt texts, line by line, with line numbers on both sides."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    lines: list[DiffLine] = []
    added = removed = 0
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        lines.append(
            DiffLine("hunk", f"@@ -{first[1] + 1},{last[2] - first[1]} +{first[3] + 1},{last[4] - first[3]} @@")
        )
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [DiffLine("same", old_lines[i], i + 1, j1 + (i - i1) + 1) for i in range(i1, i2)]
                continue
            if tag in ("replace", "delete"):
                lines += [DiffLine("del", old_lines[i], old_no=i + 1) for i in range(i1, i2)]
                removed += i2 - i1
            if tag in ("replace", "insert"):
                lines += [DiffLine("add", new_lines[j], new_no=j + 1) for j in range(j1, j2)]
                added += j2 - j1
    return PromptDiff(old_label, new_label, lines, added, removed)


def version_label(version: PromptVersion) -> str:
    return f"{version.agent} v{version.version} ({version.status})"


def prompt_diff(a: PromptVersion | None, b: PromptVersion) -> PromptDiff:
    """What changes from version a (usually the active one) to version b."""
    if a is None:
        return body_diff("", b.body, old_label="(no version)", new_label=version_label(b))
    return body_diff(a.body, b.body, old_label=version_label(a), new_label=version_label(b))


# --- Replay -------------------------------------------------------------------------------


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
    """`version` on one stored run's inputs (pipeline.steps.agent_run_replay); writes nothing."""
    row = _row_for(run)
    if timeout_s < structured.MIN_CALL_SECONDS:
        row.new_failure = "not run: the replay's time limit was reached"
        return row
    if run.agent == Agent.COACH:
        return _coach_replay(version, run, row, timeout_s=timeout_s)
    try:
        result = steps.agent_run_replay(run=run, prompt_body=version.body, timeout_s=timeout_s)
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
        row.new_failure = f"cannot be replayed: {steps.UntrustedEndpointError(config.endpoint.name)}"
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
            status=ReplayStatus.FAILED, error=_short(exc), finished_at=timezone.now()
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


# --- Evaluation sets ---------------------------------------------------------------------

# Escalation levels in order: a draft of Stability's prompt must not lower a refer or crisis.
ESCALATION_ORDER = ("none", "monitor", "refer", "crisis")


@dataclass
class ReplayScore:
    """What a replay shows that can be checked in code, summed over its runs."""

    total: int
    ran: int
    valid: int  # validated (JSON agents) or passed the quality gate (Coach)
    findings: int  # validation errors and quality-gate findings
    blocked_moves_used: int  # moves a draft suggests or uses that Stability blocked on that turn
    escalation_lowered: int  # a refer or crisis the original gave, lowered by the draft
    mean_latency_ms: int | None
    mean_completion_tokens: int | None

    @property
    def validity(self) -> float:
        return self.valid / self.total if self.total else 0.0

    @property
    def passed(self) -> bool:
        """Every run replayed and valid, no blocked move, no escalation lowered."""
        return (
            self.total > 0 and self.valid == self.total and not self.blocked_moves_used and not self.escalation_lowered
        )

    @property
    def summary(self) -> str:
        parts = [f"{self.valid} of {self.total} valid ({self.validity:.0%})", f"{self.findings} findings"]
        if self.blocked_moves_used:
            parts.append(f"{self.blocked_moves_used} blocked moves used")
        if self.escalation_lowered:
            parts.append(f"{self.escalation_lowered} escalations lowered")
        if self.mean_latency_ms is not None:
            parts.append(f"{self.mean_latency_ms} ms and {self.mean_completion_tokens} output tokens a run")
        return ", ".join(parts)


def _blocked_on_turns(turn_ids: Iterable[int]) -> dict[int, set[str]]:
    runs = AgentRun.objects.filter(turn_id__in=list(turn_ids), agent=Agent.STABILITY, round=1)
    return {run.turn_id: set((run.parsed_output or {}).get("blocked_moves", [])) for run in runs}


def _level(output: Any) -> int:
    value = output.get("escalation") if isinstance(output, dict) else None
    return ESCALATION_ORDER.index(value) if value in ESCALATION_ORDER else -1


def replay_score(report: ReplayReport) -> ReplayScore:
    rows = report.rows
    blocked = _blocked_on_turns(row.turn_id for row in rows)
    used = 0
    lowered = 0
    for row in rows:
        if isinstance(row.new_output, dict):
            moves = set(row.new_output.get("suggested_moves", [])) | set(row.new_output.get("moves_used", []))
            used += len(moves & blocked.get(row.turn_id, set()))
            original = _level(row.original_output)
            if original >= ESCALATION_ORDER.index("refer") and _level(row.new_output) < original:
                lowered += 1
    ran = [row for row in rows if row.ran]
    latencies = [row.new_latency_ms for row in ran if row.new_latency_ms is not None]
    tokens = [row.new_completion_tokens for row in ran if row.new_completion_tokens is not None]
    return ReplayScore(
        total=len(rows),
        ran=len(ran),
        valid=sum(row.valid for row in rows),
        findings=sum(len(row.new_errors) for row in rows),
        blocked_moves_used=used,
        escalation_lowered=lowered,
        mean_latency_ms=int(sum(latencies) / len(latencies)) if latencies else None,
        mean_completion_tokens=int(sum(tokens) / len(tokens)) if tokens else None,
    )


def evaluation_set_create(
    *, name: str, agent: str, run_ids: Sequence[int], user: User | None, note: str = ""
) -> EvaluationSet:
    """Keep chosen past runs of one agent as a named set that drafts are scored on."""
    name = name.strip()
    if not name:
        raise PromptOpError("give the evaluation set a name")
    if EvaluationSet.objects.filter(name=name).exists():
        raise PromptOpError(f"an evaluation set named {name!r} exists already")
    runs = list(AgentRun.objects.filter(pk__in=list(run_ids), agent=agent))
    if not runs:
        raise PromptOpError(f"choose at least one past {agent} run for the set")
    if len(runs) > REPLAY_MAX_RUNS:
        raise PromptOpError(f"an evaluation set holds at most {REPLAY_MAX_RUNS} runs")
    evaluation_set = EvaluationSet.objects.create(
        name=name, agent=agent, note=note, created_by_id=getattr(user, "pk", None)
    )
    evaluation_set.runs.set(runs)
    audit(user, evaluation_set, f"Created with {len(runs)} {agent} runs.", action_flag=ADDITION)
    return evaluation_set


def evaluation_run_start(*, version: PromptVersion, evaluation_set: EvaluationSet, user: User | None) -> ReplayJob:
    if evaluation_set.agent != version.agent:
        raise PromptOpError(f"{evaluation_set.name} holds {evaluation_set.agent} runs, not {version.agent} runs")
    run_ids = list(evaluation_set.runs.order_by("pk").values_list("pk", flat=True))
    return replay_job_start(version=version, run_ids=run_ids, user=user, evaluation_set=evaluation_set)


@dataclass
class Evaluation:
    """A version's latest finished run on one evaluation set, scored."""

    evaluation_set: EvaluationSet
    job: ReplayJob
    score: ReplayScore


def evaluations_of(version: PromptVersion) -> list[Evaluation]:
    """The latest finished evaluation of `version` on each set of its agent."""
    latest: dict[int, ReplayJob] = {}
    jobs = version.replay_jobs.filter(evaluation_set__isnull=False, status=ReplayStatus.DONE).select_related(
        "evaluation_set", "version"
    )
    for job in jobs.order_by("-finished_at", "-pk"):
        assert job.evaluation_set_id is not None
        latest.setdefault(job.evaluation_set_id, job)
    return [
        Evaluation(job.evaluation_set, job, replay_score(replay_job_report(job)))
        for job in latest.values()
        if job.evaluation_set is not None
    ]


@dataclass
class EvaluationRow:
    """One evaluation set, with the latest score of a draft and of the active version on it."""

    evaluation_set: EvaluationSet
    draft: Evaluation | None
    active: Evaluation | None


def evaluation_rows(version: PromptVersion, active: PromptVersion | None) -> list[EvaluationRow]:
    """Every evaluation set of the version's agent, each with both versions' latest scores."""
    mine = {e.evaluation_set.pk: e for e in evaluations_of(version)}
    theirs = {e.evaluation_set.pk: e for e in evaluations_of(active)} if active and active.pk != version.pk else {}
    return [
        EvaluationRow(evaluation_set, mine.get(evaluation_set.pk), theirs.get(evaluation_set.pk))
        for evaluation_set in EvaluationSet.objects.filter(agent=version.agent)
    ]


# --- Model endpoints ----------------------------------------------------------------------


class Verdict:
    """What the operator is told first: can the agents use this server now?"""

    READY = "ready"  # it answered the completion
    BUSY = "busy"  # it is up (answered the listing) but the completion queued past the wait, or 429/503
    DOWN = "down"  # it could not be reached at all
    FAILING = "failing"  # it is up but refuses or errs: configuration, model name, server error


@dataclass
class ServerLoad:
    """vLLM's own view of its queue (`/metrics` at the server root), when it offers one."""

    running: int
    waiting: int


@dataclass
class ConnectionResult:
    """What the connection test found; never an exception."""

    endpoint_id: int | None
    endpoint_name: str
    base_url: str
    model_id: str
    models: list[str] = field(default_factory=list)
    list_ms: int | None = None
    list_error: str = ""
    completion_ms: int | None = None
    completion_text: str = ""
    completion_tokens: int | None = None
    completion_error: str = ""
    completion_queued: bool = False  # it failed by timing out or by 429/503: a queue, not a fault
    unreachable: bool = False  # the listing could not connect or got no answer at all
    load: ServerLoad | None = None

    @property
    def listed(self) -> bool:
        return not self.list_error

    @property
    def model_listed(self) -> bool:
        return self.model_id in self.models

    @property
    def completed(self) -> bool:
        return self.completion_ms is not None and not self.completion_error

    @property
    def ok(self) -> bool:
        return self.completed

    @property
    def verdict(self) -> str:
        if self.completed:
            return Verdict.READY
        if not self.listed:
            return Verdict.DOWN if self.unreachable else Verdict.FAILING
        if self.completion_queued or (self.load is not None and self.load.waiting > 0):
            return Verdict.BUSY
        return Verdict.FAILING

    @property
    def verdict_text(self) -> str:
        queue = ""
        if self.load is not None:
            queue = f" (the server reports {self.load.running} requests running, {self.load.waiting} waiting)"
        return {
            Verdict.READY: "ready: it answered" + queue,
            Verdict.BUSY: "busy: the server is up but did not get to the request in time" + queue,
            Verdict.DOWN: "down: the server could not be reached",
            Verdict.FAILING: "failing: the server is up but the request failed" + queue,
        }[self.verdict]

    @property
    def summary(self) -> str:
        parts = [self.verdict_text]
        if self.listed:
            found = "listed" if self.model_listed else "NOT listed"
            parts.append(f"{len(self.models)} models in {self.list_ms} ms ({self.model_id} {found})")
        else:
            parts.append(f"listing models failed: {self.list_error}")
        if self.completed:
            parts.append(f"a {self.completion_tokens or '?'}-token completion took {self.completion_ms} ms")
        else:
            parts.append(f"completion failed: {self.completion_error}")
        return "; ".join(parts)


def server_load(base_url: str, *, timeout_s: float = TEST_METRICS_TIMEOUT_S) -> ServerLoad | None:
    """Requests running and waiting, from a vLLM server's Prometheus `/metrics` (summed over its
    model and engine labels); None where the server has no such page or it cannot be read."""
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        response = httpx.get(f"{root}/metrics", timeout=timeout_s, follow_redirects=False)
        response.raise_for_status()
        totals = {"vllm:num_requests_running": 0.0, "vllm:num_requests_waiting": 0.0}
        found = False
        for family in text_string_to_metric_families(response.text):
            for sample in family.samples:
                if sample.name in totals:
                    totals[sample.name] += sample.value
                    found = True
    except (httpx.HTTPError, ValueError):
        return None
    if not found:
        return None
    return ServerLoad(int(totals["vllm:num_requests_running"]), int(totals["vllm:num_requests_waiting"]))


def _queued(exc: BaseException) -> bool:
    """A failure that says the server is there but has not got to us: a timeout, 429 or 503."""
    cause = exc.__cause__ or exc
    if isinstance(cause, openai.APITimeoutError):
        return True
    return isinstance(cause, openai.APIStatusError) and cause.status_code in (429, 503)


def _short(exc: BaseException) -> str:
    text = f"{getattr(exc, 'code', type(exc).__name__)}: {exc}"
    return text if len(text) <= 300 else text[:300] + "…"


def endpoint_test_connection(endpoint: ModelEndpoint, *, user: User | None = None) -> ConnectionResult:
    """List the server's models and time one tiny completion, each with a short timeout.
    Never raises: every failure is in the result. An endpoint not marked trusted is not asked
    at all: the request would carry its API key."""
    result = ConnectionResult(endpoint.pk, endpoint.name, endpoint.base_url, endpoint.model_id)
    if not endpoint.trusted_for_coachee_data:
        result.list_error = "not tested: this endpoint is not marked trusted by a platform administrator"
        result.completion_error = "skipped"
        audit(user, endpoint, f"Connection test refused: {result.list_error}.")
        return result
    try:
        spec = dataclasses.replace(
            EndpointSpec.from_endpoint(endpoint),
            connect_timeout_s=min(endpoint.connect_timeout_s or TEST_CONNECT_TIMEOUT_S, TEST_CONNECT_TIMEOUT_S),
            read_timeout_s=TEST_COMPLETION_TIMEOUT_S,
        )
        started = time.monotonic()
        try:
            result.models = list_models(spec, timeout_s=TEST_LIST_TIMEOUT_S)
            result.list_ms = int((time.monotonic() - started) * 1000)
        except Exception as exc:
            result.list_error = _short(exc)
            # A server that cannot be reached will not complete either: spare the second wait.
            result.unreachable = isinstance(exc, LLMTransientError)
        if result.unreachable:
            result.completion_error = "skipped: the server did not answer"
        else:
            started = time.monotonic()
            try:
                completion = chat_complete(
                    spec,
                    TEST_PROMPT,
                    max_tokens=TEST_MAX_TOKENS,
                    temperature=0.0,
                    extra_body=extra_body_for(spec.kind, thinking=False),
                    headers={"X-Coaching-Agent": "connection-test"},
                    timeout_s=TEST_COMPLETION_TIMEOUT_S,
                )
                result.completion_ms = int((time.monotonic() - started) * 1000)
                result.completion_text = completion.content[:200]
                result.completion_tokens = completion.completion_tokens
            except Exception as exc:
                result.completion_error = _short(exc)
                result.completion_queued = _queued(exc)
            if spec.kind == EndpointKind.VLLM:
                result.load = server_load(spec.base_url)
    except Exception as exc:  # a malformed endpoint row: report it, do not raise
        result.list_error = result.list_error or _short(exc)
        result.completion_error = result.completion_error or "skipped"
    try:
        audit(user, endpoint, f"Tested the connection: {'OK' if result.ok else 'FAILED'}; {result.summary}.")
    except Exception as exc:  # the audit must not turn a report into an error page
        result.completion_error = result.completion_error or f"(not recorded in the log: {exc})"
    return result


def agents_sharing(endpoint: ModelEndpoint) -> list[AgentConfig]:
    return list(AgentConfig.objects.filter(endpoint=endpoint).order_by("agent"))
