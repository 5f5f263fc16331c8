"""Token budgets that fit each JSON agent's longest answer; operators may view the quality gate's
findings (QualityFinding, added to the operators' role in 0010 for fresh databases).

The output schemas now bound every string and list (agents/schemas.py), and vLLM's grammar closes
a string or list at its bound, so an answer has a longest form; a max_tokens below it cut long
answers off (CI, on real vLLM: Shadow valid in 6 of 12 runs, every failure "cut off by the token
limit"). These are `llm.schema.answer_token_bound` for each schema, rounded up. Only raises: a
budget an operator set higher stays.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

from agents.migrations._permissions import create_all_permissions

BUDGETS = {
    "shadow": 1000,
    "persona": 750,
    "stability": 550,
    "synth": 1150,
    "critic": 250,
    "summarizer": 2350,
    "summary_check": 3200,
}


def seed(apps: Any, schema_editor: Any) -> None:
    AgentConfig = apps.get_model("agents", "AgentConfig")
    for agent, budget in BUDGETS.items():
        AgentConfig.objects.filter(agent=agent, max_tokens__lt=budget).update(max_tokens=budget)


def grant_findings_view(apps: Any, schema_editor: Any) -> None:
    # Permissions are normally created after all migrations; the grant needs this one now.
    create_all_permissions(apps)
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    view = Permission.objects.filter(content_type__app_label="agents", codename="view_qualityfinding")
    for group in Group.objects.filter(name="operators"):
        group.permissions.add(*view)


class Migration(migrations.Migration):
    dependencies = [("agents", "0018_crisis_languages")]

    operations = [
        migrations.RunPython(seed, migrations.RunPython.noop),
        migrations.RunPython(grant_findings_view, migrations.RunPython.noop),
    ]
