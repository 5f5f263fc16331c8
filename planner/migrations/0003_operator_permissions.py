"""Operators plan deployments: they see and edit the catalogue (a GPU's hourly price, a recorded
run, an efficiency class), place endpoints on GPUs and open the plan page (which needs the view
permission on placements). Without this grant only superusers could, and the issue asks for an
operator page."""

from typing import Any

from django.db import migrations

from agents.migrations._permissions import create_all_permissions

PLANNER_MODELS = ["gpu", "modelcard", "measurement", "placement", "efficiency"]
OPERATOR_PLANNER_PERMISSIONS = [
    f"{action}_{model}" for model in PLANNER_MODELS for action in ("view", "add", "change", "delete")
]


def grant(apps: Any, schema_editor: Any) -> None:
    # Permissions are normally created after all migrations; the grant needs these now.
    create_all_permissions(apps)
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    granted = Permission.objects.filter(content_type__app_label="planner", codename__in=OPERATOR_PLANNER_PERMISSIONS)
    for group in Group.objects.filter(name="operators"):
        group.permissions.add(*granted)


class Migration(migrations.Migration):
    dependencies = [
        ("planner", "0002_seed_catalogue"),
        ("agents", "0010_roles"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
