"""Create or update a model endpoint and point agents at it (used by the run script)."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agents.models import Agent, AgentConfig, EndpointKind, ModelEndpoint


class Command(BaseCommand):
    help = "Create or update a model endpoint; with --agents, point those agents (or 'all') at it."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("name")
        parser.add_argument("--kind", choices=EndpointKind.values, required=True)
        parser.add_argument("--base-url", required=True)
        parser.add_argument("--model", required=True)
        parser.add_argument("--api-key-env", default="")
        parser.add_argument("--max-concurrency", type=int, default=8)
        parser.add_argument("--read-timeout", type=float, default=120.0)
        parser.add_argument("--agents", default="", help="Comma-separated agent names, or 'all'.")

    def handle(self, *args: Any, **options: Any) -> None:
        endpoint, created = ModelEndpoint.objects.update_or_create(
            name=options["name"],
            defaults={
                "kind": options["kind"],
                "base_url": options["base_url"],
                "model_id": options["model"],
                "api_key_env": options["api_key_env"],
                "max_concurrency": options["max_concurrency"],
                "read_timeout_s": options["read_timeout"],
            },
        )
        agents = Agent.values if options["agents"] == "all" else [a for a in options["agents"].split(",") if a]
        unknown = set(agents) - set(Agent.values)
        if unknown:
            raise CommandError(f"unknown agents: {', '.join(sorted(unknown))}")
        updated = AgentConfig.objects.filter(agent__in=agents).update(endpoint=endpoint)
        verb = "created" if created else "updated"
        self.stdout.write(f"endpoint {endpoint.name} {verb}; {updated} agent(s) now use it")
