"""The three roles as groups. Coachees have no admin access; coaches review (view) their assigned
coachees' conversations and annotate them; operators change configuration. Superusers see all.
Which rows a coach may see is enforced in the admin (agents/admin/scoping.py), not by these
model permissions alone."""

from django.db import migrations

from agents.migrations._permissions import create_all_permissions

COACH_PERMISSIONS = [
    "view_coachingsession",
    "view_message",
    "view_turn",
    "view_agentrun",
    "view_conflict",
    "view_blackboardversion",
    "view_annotation",
    "add_annotation",
    "change_annotation",
]
OPERATOR_MODELS = ["modelendpoint", "agentconfig", "promptversion", "coachingmove", "crisisresource", "crisispattern"]
OPERATOR_PERMISSIONS = [f"{action}_{model}" for model in OPERATOR_MODELS for action in ("view", "add", "change")] + [
    "delete_coachingmove",
    "delete_crisisresource",
    "delete_crisispattern",
    "view_coachassignment",
    "view_qualityfinding",  # granted on migrated databases by 0019
]
ROLES = {"coachees": [], "coaches": COACH_PERMISSIONS, "operators": OPERATOR_PERMISSIONS}


def create_roles(apps, schema_editor):
    # Permissions are normally created after all migrations; the groups need them now.
    create_all_permissions(apps)
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, codenames in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set(Permission.objects.filter(content_type__app_label="agents", codename__in=codenames))


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0009_coach_review"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_roles, migrations.RunPython.noop)]
