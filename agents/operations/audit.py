"""The audit trail of operator actions: each change is one entry in Django admin's LogEntry (who,
which object, when, what), so the admin's history pages show it."""

from __future__ import annotations

from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models

User = AbstractBaseUser | AnonymousUser


def person_id(user: User | None) -> int | None:
    """The id of a logged-in person, or None (a shell, a migration, an anonymous request)."""
    if user is None or not user.is_authenticated or user.pk is None:
        return None
    return int(user.pk)


def audit(user: User | None, obj: models.Model, message: str, *, action_flag: int = CHANGE) -> LogEntry | None:
    """One LogEntry (who, which object, when, what) for an action that is not a plain admin save."""
    uid = person_id(user)
    if uid is None:
        return None  # a shell or migration: no person to record
    entry = LogEntry.objects.log_actions(
        user_id=uid, queryset=[obj], action_flag=action_flag, change_message=message, single_object=True
    )
    return entry if isinstance(entry, LogEntry) else None
