"""Hundreds of generated bad HTTP requests to the app's pages and forms: never a server error."""

from __future__ import annotations

import random
from typing import Any

import pytest
from django.test import Client

from agents.turns import sessions
from tests.support.people import make_coachee

pytestmark = pytest.mark.django_db

REQUESTS = 600
NASTY = [
    "",
    " ",
    "\x00",
    "%ED%A0%80",  # a lone surrogate, percent-encoded (the test client cannot send one raw)
    "\u202e\u200b",
    "<script>alert(1)</script>",
    "' OR 1=1 --",
    "../../etc/passwd",
    "%00",
    "9" * 40,
    "-1",
    "x" * 5000,
    "\U0001f600" * 50,
    "{{ 7*7 }}",
    "${7*7}",
]
PAGES = [
    "/",
    "/sessions/",
    "/sessions/new/",
    "/sessions/{sid}/",
    "/sessions/{sid}/end/",
    "/sessions/{big}/",
    "/sessions/{big}/end/",
    "/memory/",
    "/accounts/login/",
    "/accounts/signup/",
    "/accounts/logout/",
    "/accounts/password_change/",
    "/healthz",
    "/admin/",
    "/admin/login/",
    "/static/chat/../../settings.py",
    "/nope/{nasty}",
]
FORM_FIELDS = ["username", "password", "password1", "password2", "old_password", "new_password1", "new_password2",
               "item_id", "action", "text", "next", "csrfmiddlewaretoken"]  # fmt: skip


def bad_request(rng: random.Random, sid: int) -> tuple[str, str, dict[str, Any]]:
    path = rng.choice(PAGES).format(sid=sid, big="9" * rng.randint(19, 40), nasty=rng.choice(NASTY[4:]))
    method = rng.choice(["get", "post", "post", "put", "delete", "patch", "head", "options"])
    data: dict[str, Any] = {rng.choice(FORM_FIELDS): rng.choice(NASTY) for _ in range(rng.randint(0, 6))}
    if rng.random() < 0.2:
        data[rng.choice(FORM_FIELDS)] = [rng.choice(NASTY), rng.choice(NASTY)]
    return method, path, data


@pytest.mark.parametrize("logged_in", [False, True])
def test_generated_bad_requests_never_get_a_server_error(seeded: None, logged_in: bool) -> None:
    user = make_coachee()
    session = sessions.session_start(user_id=user.pk)
    client = Client(raise_request_exception=False)
    if logged_in:
        client.force_login(user)
    rng = random.Random(1130 + logged_in)
    statuses: dict[int, int] = {}
    for _ in range(REQUESTS // 2):
        method, path, data = bad_request(rng, session.pk)
        response = getattr(client, method)(path, data=data if method in ("get", "post") else None)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        assert response.status_code < 500, (method, path, str(data)[:200])
        if logged_in and not client.session.get("_auth_user_id"):
            client.force_login(user)  # a generated logout ended the session; keep probing logged in
    assert sum(statuses.values()) == REQUESTS // 2
    assert any(code >= 400 for code in statuses)  # the generator does hit error paths
