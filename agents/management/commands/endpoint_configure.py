"""Create or update a model endpoint and point agents at it (used by the run script).

Whoever runs this holds the server's environment, and so its secrets, already: a platform
administrator by definition. The endpoint is marked trusted for coachee data unless --untrusted.
"""

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from agents.models import Agent, AgentConfig, EndpointKind, ModelEndpoint


class Command(BaseCommand):
    help = "Create or update a model endpoint; with --agents, point those agents (or 'all') at it."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("name")
        parser.add_argument("--kind", choices=EndpointKind.values, required=True)
        parser.add_argument("--base-url", required=True)
        parser.add_argument("--model", required=True)
        parser.add_argument(
            "--api-key-env", default="", help="Variable holding the key; must match COACHING_LLM_KEY_ENV_PATTERN."
        )
        parser.add_argument(
            "--untrusted",
            action="store_true",
            help="Do not mark it trusted for coachee data (replays and connection tests refuse it).",
        )
        parser.add_argument("--max-concurrency", type=int, default=8)
        parser.add_argument("--read-timeout", type=float, default=120.0)
        parser.add_argument("--agents", default="", help="Comma-separated agent names, or 'all'.")
        parser.add_argument(
            "--priority-scheduling",
            action="store_true",
            help="The server runs with vLLM's --scheduling-policy priority (Coach first).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            endpoint, created = self._save(options)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        agents = Agent.values if options["agents"] == "all" else [a for a in options["agents"].split(",") if a]
        unknown = set(agents) - set(Agent.values)
        if unknown:
            raise CommandError(f"unknown agents: {', '.join(sorted(unknown))}")
        updated = AgentConfig.objects.filter(agent__in=agents).update(endpoint=endpoint)
        verb = "created" if created else "updated"
        self.stdout.write(f"endpoint {endpoint.name} {verb}; {updated} agent(s) now use it")

    def _save(self, options: dict[str, Any]) -> tuple[ModelEndpoint, bool]:
        return ModelEndpoint.objects.update_or_create(
            name=options["name"],
            defaults={
                "kind": options["kind"],
                "base_url": options["base_url"],
                "model_id": options["model"],
                "api_key_env": options["api_key_env"],
                "max_concurrency": options["max_concurrency"],
                "read_timeout_s": options["read_timeout"],
                "priority_scheduling": options["priority_scheduling"],
                "trusted_for_coachee_data": not options["untrusted"],
            },
        )
