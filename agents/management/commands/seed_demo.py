"""Create (or refresh) the demo coachee, coach and operator, and print how to log in."""

import secrets
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from agents.models import CoachAssignment


def demo_password(path: Path) -> str:
    """A random password, made once per machine and kept outside the repository."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(12)
    path.write_text(password)
    path.chmod(0o600)
    return password


class Command(BaseCommand):
    help = "Create the demo coachee, coach and operator accounts."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--password-file", default=str(Path.home() / ".cache" / "coaching-chat" / "demo-password"))
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(self, *args: Any, **options: Any) -> None:
        password = demo_password(Path(options["password_file"]))
        # The groups and their permissions come from migration 0010_roles.
        coachees = Group.objects.get(name="coachees")
        coaches = Group.objects.get(name="coaches")
        operators = Group.objects.get(name="operators")

        User = get_user_model()
        for username, staff, group in (
            ("coachee", False, coachees),
            ("coach", True, coaches),
            ("operator", True, operators),
        ):
            user, _ = User.objects.get_or_create(username=username)
            user.is_staff = staff
            user.set_password(password)
            user.save()
            user.groups.add(group)
        # The demo coach reviews the demo coachee.
        CoachAssignment.objects.get_or_create(
            coach=User.objects.get(username="coach"), coachee=User.objects.get(username="coachee")
        )
        base = options["base_url"].rstrip("/")
        self.stdout.write(
            "\n".join(
                [
                    "",
                    f"  Chat:   {base}/      log in as coachee / {password}",
                    f"  Admin:  {base}/admin/ log in as coach / {password}  or  operator / {password}",
                    "",
                ]
            )
        )
