from django.apps import AppConfig


class PlannerConfig(AppConfig):
    """The model and GPU catalogue and the deployment planner (reads agents' routing; agents
    never imports planner)."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "planner"
    verbose_name = "Deployment planner"
