"""Routing: ordered fallback endpoints per agent, and what a run's routing cost (slot wait,
the primary it fell back from). Fallbacks are part of the agents' setup, so their table renews
the "setup" change stamp like the others (migration 0015's trigger function), and operators
may edit them as they edit agent configs."""

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

from agents.migrations._permissions import create_all_permissions

FALLBACK_PERMISSIONS = ["view_agentfallback", "add_agentfallback", "change_agentfallback", "delete_agentfallback"]


def grant_fallbacks(apps: Any, schema_editor: Any) -> None:
    # Permissions are normally created after all migrations; the grant needs these now.
    create_all_permissions(apps)
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    granted = Permission.objects.filter(content_type__app_label="agents", codename__in=FALLBACK_PERMISSIONS)
    for group in Group.objects.filter(name="operators"):
        group.permissions.add(*granted)


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0021_crisis_patterns_narrowed'),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AddField(
            model_name='agentrun',
            name='fallback_from',
            field=models.ForeignKey(blank=True, help_text='The primary endpoint this run fell back from, if it did.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='agents.modelendpoint'),
        ),
        migrations.AddField(
            model_name='agentrun',
            name='slot_wait_ms',
            field=models.PositiveIntegerField(blank=True, help_text="Time spent waiting for a free slot under the endpoints' concurrency limits.", null=True),
        ),
        migrations.AlterField(
            model_name='modelendpoint',
            name='max_concurrency',
            field=models.PositiveIntegerField(default=8, help_text="Most requests in flight to this server at once, across every process (a Redis lease semaphore in agents.llm.limits); a call waits for a free slot until its stage's deadline."),
        ),
        migrations.CreateModel(
            name='AgentFallback',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('position', models.PositiveSmallIntegerField(default=1, help_text='Tried in ascending order after the primary.')),
                ('config', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='fallbacks', to='agents.agentconfig')),
                ('endpoint', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='fallback_for', to='agents.modelendpoint')),
            ],
            options={
                'ordering': ['config', 'position', 'pk'],
                'constraints': [models.UniqueConstraint(fields=('config', 'endpoint'), name='fallback_endpoint_once_per_agent')],
            },
        ),
        migrations.RunSQL(
            "CREATE TRIGGER agents_agentfallback_stamp AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
            "ON agents_agentfallback FOR EACH STATEMENT EXECUTE FUNCTION agents_stamp_setup();",
            "DROP TRIGGER IF EXISTS agents_agentfallback_stamp ON agents_agentfallback;",
        ),
        migrations.RunPython(grant_fallbacks, migrations.RunPython.noop),
    ]
