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
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import IntegrityError, models, transaction
from django.db.models import F, Max
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from pydantic import ValidationError

from agents import pipeline
from agents.llm.client import EndpointSpec, chat_complete, list_models
from agents.llm.errors import LLMTransientError
from agents.llm.schema import extra_body_for
from agents.models import AgentConfig, AgentRun, ModelEndpoint, PromptStatus, PromptVersion, RunStatus
from agents.prompts import PLACEHOLDERS, placeholders_in
from agents.schemas import OUTPUT_SCHEMAS
from agents.selectors import turn_number

User = AbstractBaseUser | AnonymousUser

# Replays run in the admin request: a bound on how many runs and how long, all together.
REPLAY_MAX_RUNS = 10
REPLAY_TOTAL_TIMEOUT_S = 90.0
# The connection test must answer quickly even when the server does not.
TEST_CONNECT_TIMEOUT_S = 3.0
TEST_LIST_TIMEOUT_S = 5.0
TEST_COMPLETION_TIMEOUT_S = 15.0
TEST_PROMPT = [{"role": "user", "content": "Reply with the single word: ready"}]
TEST_MAX_TOKENS = 8
MAX_SHOWN_CHARS = 4000


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
        original_output=schema_ordered(run.agent, run.parsed_output),
        original_raw=run.raw_output,
        original_errors=list(run.validation_errors or []),
        original_error=run.error,
        original_prompt_tokens=run.prompt_tokens,
        original_completion_tokens=run.completion_tokens,
        original_latency_ms=run.latency_ms,
    )


def prompt_replay(
    *,
    version: PromptVersion,
    runs: Sequence[AgentRun],
    user: User | None = None,
    total_timeout_s: float = REPLAY_TOTAL_TIMEOUT_S,
) -> ReplayReport:
    """Run `version` on the stored inputs of each run, through the agent's configured endpoint
    (pipeline.agent_run_replay), within one overall time limit. Writes no AgentRun: the stored
    runs stay the originals to compare with. The replay itself is recorded in the audit log."""
    if version.agent not in OUTPUT_SCHEMAS:
        raise PromptOpError(f"{version.agent} answers in free text; only the JSON agents can be replayed")
    if not runs:
        raise PromptOpError("choose at least one past run to replay on")
    if len(runs) > REPLAY_MAX_RUNS:
        raise PromptOpError(f"choose at most {REPLAY_MAX_RUNS} runs")
    ids = [run.pk for run in runs]
    loaded = (
        AgentRun.objects.select_related("turn", "prompt_version")
        .annotate(turn_number=turn_number("turn__"))
        .in_bulk(ids)
    )
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
    started = time.monotonic()
    rows: list[ReplayRow] = []
    for run in (loaded[run_id] for run_id in ids if run_id in loaded):
        row = _row_for(run)
        rows.append(row)
        remaining = total_timeout_s - (time.monotonic() - started)
        if remaining < pipeline.MIN_CALL_SECONDS:
            row.new_failure = "not run: the replay's time limit was reached"
            continue
        try:
            result = pipeline.agent_run_replay(run=run, prompt_body=version.body, timeout_s=remaining)
        except (KeyError, ValueError, AgentConfig.DoesNotExist) as exc:
            row.new_failure = f"cannot be replayed: {exc}"
            continue
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
    report = ReplayReport(
        version.pk, version.agent, version.version, version.status, rows, int((time.monotonic() - started) * 1000)
    )
    turns = ", ".join(str(row.turn_id) for row in rows)
    audit(user, version, f"Replayed v{version.version} on {len(rows)} past runs (turns {turns}): {report.summary}.")
    return report


# --- Model endpoints ----------------------------------------------------------------------


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
    def summary(self) -> str:
        parts = []
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
        unreachable = False
        started = time.monotonic()
        try:
            result.models = list_models(spec, timeout_s=TEST_LIST_TIMEOUT_S)
            result.list_ms = int((time.monotonic() - started) * 1000)
        except Exception as exc:
            result.list_error = _short(exc)
            # A server that cannot be reached will not complete either: spare the second wait.
            unreachable = isinstance(exc, LLMTransientError)
        if unreachable:
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
