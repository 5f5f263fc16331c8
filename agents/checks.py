"""System checks for the pipeline's invariants (run by `manage.py check` and at startup).

agents.E001  an agent has no active prompt
agents.E002  an agent has no configuration
agents.E003  an agent's model endpoint is missing or unusable (no base URL, not an http(s) URL, no model id)
agents.E004  an agent's active prompt names a placeholder that agent is not given
"""

import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

from django.core.checks import Error, register
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor

from agents.llm.keys import api_key_env_problem
from agents.models import Agent, AgentConfig, ModelEndpoint, PromptStatus, PromptVersion
from agents.prompts import PLACEHOLDERS, placeholders_in

# One DNS label, then more after dots. Unlike Django's URLValidator this takes single-label
# hosts, which is what model servers on a private network or in compose are called (http://vllm:8000/v1).
_HOSTNAME = re.compile(
    r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$"
)


def base_url_problem(url: str) -> str | None:
    """Why a model server base URL cannot be used (None when it can): http(s), a host, a port if any."""
    if not url.strip():
        return "no base URL"
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError:
        return f"a base URL {url!r} that is not a valid URL"
    if parts.scheme not in ("http", "https"):
        return f"a base URL {url!r} that is not an http(s) URL"
    host = parts.hostname or ""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not _HOSTNAME.match(host):
            return f"a base URL {url!r} without a valid host"
    return None


def endpoint_problem(endpoint: ModelEndpoint | None) -> str | None:
    """Why an agent cannot call this endpoint, or None when it can."""
    if endpoint is None:
        return "points at a model endpoint that does not exist"
    problem = base_url_problem(endpoint.base_url)
    if problem is not None:
        return f"uses endpoint {endpoint.name}, which has {problem}"
    if not endpoint.model_id.strip():
        return f"uses endpoint {endpoint.name}, which names no model"
    key_problem = api_key_env_problem(endpoint.api_key_env)
    if key_problem is not None:
        # Its calls would fail at call time (the client refuses to send the key).
        return f"uses endpoint {endpoint.name}, whose API-key variable is refused: {key_problem}"
    return None


def prompt_problem(agent: str, body: str) -> str | None:
    try:
        unknown = placeholders_in(body) - PLACEHOLDERS.get(agent, frozenset())
    except ValueError as exc:
        return str(exc)
    if unknown:
        return "it names " + ", ".join(f"${{{name}}}" for name in sorted(unknown)) + ", which this agent is not given"
    return None


def migrations_pending() -> bool:
    """True when the database lacks migrations: their data (agents' configs and prompts) is
    not there yet, and `migrate` itself runs these checks before applying them."""
    executor = MigrationExecutor(connection)
    return bool(executor.migration_plan(executor.loader.graph.leaf_nodes()))


@register("agents", deploy=False)
def agents_configured(app_configs: Any, **kwargs: Any) -> list[Error]:
    errors: list[Error] = []
    try:
        if migrations_pending():
            return []  # checked again once migrated (run.sh runs `check` after `migrate`)
        active = {p.agent: p for p in PromptVersion.objects.filter(status=PromptStatus.ACTIVE)}
        # No join: a config whose endpoint row is gone must still be seen (and reported).
        configs = {c.agent: c for c in AgentConfig.objects.all()}
        endpoints = ModelEndpoint.objects.in_bulk({c.endpoint_id for c in configs.values()})
    except DatabaseError:
        return []  # no database or no tables yet (before the first migrate): nothing to check
    for agent in Agent.values:
        prompt = active.get(agent)
        if prompt is None:
            errors.append(
                Error(
                    f"agent {agent} has no active prompt", hint="Activate a prompt version in admin.", id="agents.E001"
                )
            )
        elif (problem := prompt_problem(agent, prompt.body)) is not None:
            errors.append(
                Error(
                    f"agent {agent}'s active prompt v{prompt.version} cannot be filled: {problem}",
                    hint="Activate a corrected version, or roll back, in admin (Prompt versions).",
                    id="agents.E004",
                )
            )
        config = configs.get(agent)
        if config is None:
            errors.append(
                Error(f"agent {agent} has no configuration", hint="Add an agent config in admin.", id="agents.E002")
            )
        elif (problem := endpoint_problem(endpoints.get(config.endpoint_id))) is not None:
            errors.append(
                Error(
                    f"agent {agent} {problem}",
                    hint="Fix the model endpoint, or point the agent at another one, in admin "
                    "(or: manage.py endpoint_configure).",
                    id="agents.E003",
                )
            )
    return errors
