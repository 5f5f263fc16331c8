"""Prompt versions: which placeholders a body may use, drafts, activation and rollback.

Prompt versions are immutable once created: editing any version (active, retired or draft)
creates a new draft, so every text that ever ran, or was replayed, stays on record.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.admin.models import ADDITION
from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from agents.models import PromptStatus, PromptVersion
from agents.operations.audit import User, audit, person_id
from agents.operations.errors import PromptOpError
from agents.prompts import PLACEHOLDERS, placeholders_in


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
