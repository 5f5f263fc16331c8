from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Coaching agents"

    def ready(self) -> None:
        from agents import checks, signals  # noqa: F401  (registers the system checks and receivers)
        from agents.observability import metrics, tracing

        metrics.setup()
        tracing.setup()
