"""System checks for the pipeline's invariants (run by `manage.py check` and at startup)."""

from typing import Any

from django.core.checks import Error, register
from django.db import DatabaseError

from agents.models import Agent, AgentConfig, PromptStatus, PromptVersion


@register("agents", deploy=False)
def agents_configured(app_configs: Any, **kwargs: Any) -> list[Error]:
    errors: list[Error] = []
    try:
        active = set(PromptVersion.objects.filter(status=PromptStatus.ACTIVE).values_list("agent", flat=True))
        configs = {c.agent: c for c in AgentConfig.objects.select_related("endpoint")}
    except DatabaseError:
        return []  # no tables yet (before the first migrate): nothing to check
    for agent in Agent.values:
        if agent not in active:
            errors.append(
                Error(
                    f"agent {agent} has no active prompt", hint="Activate a prompt version in admin.", id="agents.E001"
                )
            )
        if agent not in configs:
            errors.append(
                Error(f"agent {agent} has no configuration", hint="Add an agent config in admin.", id="agents.E002")
            )
    return errors
