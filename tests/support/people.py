"""Coachees, coaches, operators and platform admins, and clients logged in as them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from agents.models import (
    CoachAssignment,
)
from agents.turns import sessions


def make_coachee(username: str = "coachee", password: str = "pw-for-tests-1") -> Any:
    user = get_user_model().objects.create_user(username=username, password=password)
    return user


def make_operator(username: str = "op", password: str = "pw-for-tests-1", *, coach: bool = False) -> Any:
    user = get_user_model().objects.create_user(username=username, password=password, is_staff=True)
    user.groups.add(Group.objects.get(name="operators"))
    if coach:
        user.groups.add(Group.objects.get(name="coaches"))
    return user


def make_platform_admin(username: str = "platform", password: str = "pw-for-tests-1") -> Any:
    user = get_user_model().objects.create_user(username=username, password=password, is_staff=True)
    user.groups.add(Group.objects.get(name="platform_admins"))
    return user


PASSWORD = "pw-for-tests-1"


def make_coach(username: str, *, coachees: Sequence[Any] = (), operator: bool = False) -> Any:
    user = get_user_model().objects.create_user(username=username, password=PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name="coaches"))
    if operator:
        user.groups.add(Group.objects.get(name="operators"))
    for coachee in coachees:
        CoachAssignment.objects.create(coach=user, coachee=coachee)
    return user


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def coachee_client(username: str = "coachee") -> tuple[Client, Any]:
    user = make_coachee(username)
    client = Client()
    client.force_login(user)
    return client, user


def coachee_with_session(username: str) -> int:
    """A new coachee with one open session; its id."""
    user = make_coachee(username)
    return int(sessions.session_start(user_id=user.pk).pk)
