"""Shared by the data migrations that grant permissions (the migration loader skips modules whose
name starts with an underscore)."""

from typing import Any

from django.contrib.auth.management import create_permissions


def create_all_permissions(apps: Any) -> None:
    """Create every model's permissions now (Django normally does it after all migrations)."""
    for app_config in apps.get_app_configs():
        # A migration's app states have no models module, which create_permissions skips; the
        # real registry (the tests call the seeds after a flush) keeps its own.
        models_module = getattr(app_config, "models_module", None)
        app_config.models_module = models_module or True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = models_module
