"""The operator boundary (issue 20): who may point the product at a server is a platform
administrator, not an operator.

- A new role, *platform_admins*: adds and changes model endpoints (base URL, API-key variable) and
  marks them trusted for coachee data. Operators keep viewing endpoints and choosing among them in
  agent configs, but no longer add or change them.
- `ModelEndpoint.trusted_for_coachee_data`: replays and connection tests refuse other endpoints.
  The seeded embedded endpoint (a local server the app starts itself) is trusted while it still
  points where the seed put it; every other existing endpoint waits for a platform administrator.
- `api_key_env` must match the allow-list pattern (agents/llm/keys.py).
"""

from django.db import migrations, models

import agents.llm.keys
from agents.migrations._permissions import create_all_permissions

PLATFORM_ADMIN_PERMISSIONS = ["view_modelendpoint", "add_modelendpoint", "change_modelendpoint", "view_agentconfig"]
OPERATOR_LOSES = ["add_modelendpoint", "change_modelendpoint"]
ROLES = {"platform_admins": PLATFORM_ADMIN_PERMISSIONS}
EMBEDDED = {"name": "embedded", "base_url": "http://127.0.0.1:8081/v1"}


def _permissions(apps, codenames):
    Permission = apps.get_model("auth", "Permission")
    return Permission.objects.filter(content_type__app_label="agents", codename__in=codenames)


def seed(apps, schema_editor):
    """Idempotent; also run by the tests' seed_defaults after a flush."""
    create_all_permissions(apps)
    Group = apps.get_model("auth", "Group")
    for name, codenames in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set(_permissions(apps, codenames))
    operators = Group.objects.filter(name="operators").first()
    if operators is not None:
        operators.permissions.remove(*_permissions(apps, OPERATOR_LOSES))
    ModelEndpoint = apps.get_model("agents", "ModelEndpoint")
    ModelEndpoint.objects.filter(**EMBEDDED).update(trusted_for_coachee_data=True)


def unseed(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    operators = Group.objects.filter(name="operators").first()
    if operators is not None:
        operators.permissions.add(*_permissions(apps, OPERATOR_LOSES))
    Group.objects.filter(name__in=ROLES).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0016_quality_gate"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AddField(
            model_name="modelendpoint",
            name="trusted_for_coachee_data",
            field=models.BooleanField(
                default=False,
                help_text="A platform administrator vouches for this server: it may receive coachees' "
                "conversations (replays, agents) and the API key (connection tests).",
                verbose_name="trusted for coachee data",
            ),
        ),
        migrations.AlterField(
            model_name="modelendpoint",
            name="api_key_env",
            field=models.CharField(
                blank=True,
                help_text="Name of the environment variable holding the API key (never the key itself); "
                "it must match COACHING_LLM_KEY_ENV_PATTERN (by default COACHING_LLM_KEY_*).",
                max_length=100,
                validators=[agents.llm.keys.validate_api_key_env],
            ),
        ),
        migrations.RunPython(seed, unseed),
    ]
