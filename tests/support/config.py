"""The seeded defaults (prompts, agent configs, moves, crisis patterns) and where agents point."""

from __future__ import annotations

import importlib

from django.apps import apps as django_apps

from agents.llm.simulator.server import SimulatorServer
from agents.models import (
    AgentConfig,
    ModelEndpoint,
)


def seed_defaults() -> None:
    """The data migrations' seeds, again: transactional tests truncate tables between tests."""
    for migration in (
        "0002_seed_defaults",
        "0004_seed_crisis_resources",
        "0007_seed_crisis_patterns",
        "0013_memory_summaries_predictions",
        "0014_crisis_patterns_batch_2",
        "0018_crisis_languages",
        "0019_answer_token_budgets",
    ):
        importlib.import_module(f"agents.migrations.{migration}").seed(django_apps, None)
    seed_roles()
    # After the roles: it adds the platform administrators and takes endpoint changes from
    # operators, and trusts the seeded embedded endpoint.
    importlib.import_module("agents.migrations.0017_endpoint_trust").seed(django_apps, None)
    importlib.import_module("agents.migrations.0024_replay_jobs_evaluation_sets").grant_evaluation_sets(
        django_apps, None
    )


def seed_roles() -> None:
    """The role groups of migration 0010 (permissions themselves survive a flush: Django
    recreates them after truncating)."""
    from django.contrib.auth.models import Group, Permission

    roles = importlib.import_module("agents.migrations.0010_roles").ROLES
    for name, codenames in roles.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set(Permission.objects.filter(content_type__app_label="agents", codename__in=codenames))


def point_agents_at(base_url: str, *, kind: str = "vllm", read_timeout_s: float = 30.0) -> ModelEndpoint:
    endpoint, _ = ModelEndpoint.objects.update_or_create(
        name="test",
        defaults={
            "kind": kind,
            "base_url": base_url,
            "model_id": "sim-model",
            "read_timeout_s": read_timeout_s,
            "connect_timeout_s": 2.0,
            # The simulator answers any number of requests at once, as a batching vLLM does; the
            # limit is held across processes now (agents.llm.limits), and 8 would queue the
            # fault matrix's 20 concurrent turns behind each other. Routing tests set their own.
            "max_concurrency": 64,
            # The tests' own simulator: as a platform administrator would mark it.
            "trusted_for_coachee_data": True,
        },
    )
    AgentConfig.objects.update(endpoint=endpoint)
    return endpoint


def endpoint_on(sim: SimulatorServer, name: str, *, max_concurrency: int = 8) -> ModelEndpoint:
    endpoint, _ = ModelEndpoint.objects.update_or_create(
        name=name,
        defaults={
            "kind": "vllm",
            "base_url": sim.base_url,
            "model_id": "sim-model",
            "read_timeout_s": 30.0,
            "connect_timeout_s": 2.0,
            "max_concurrency": max_concurrency,
            "trusted_for_coachee_data": True,
        },
    )
    return endpoint
