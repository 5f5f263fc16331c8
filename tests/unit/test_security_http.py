"""Findings 5 and 7 of the security probe (issue 20) on the HTTP side: text the database cannot
store reaching a query (a 500 for `/admin/autocomplete/?term=%00`), and account pages without
per-address limits (20 sign-ups in 5.8 s; a few passwords tried over many usernames never
slowed). Then a generated-input run over every text field of the pages and the admin. The
autocomplete's NUL through Daphne is tests/integration/test_security_http_live.py."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from agents.turns import sessions
from tests.support.conversations import build_conversation
from tests.support.people import make_coach, make_coachee

pytestmark = pytest.mark.timeout(300)
MIB = 1024 * 1024
# Every kind of text the probe used, as they arrive in a query string or a form: NUL, a lone
# surrogate and a broken sequence (percent-encoded: the test client sends bytes as given), control
# characters, and a 1 MiB string.
QUERY_VALUES = ["%00", "a%00b", "%ED%A0%80", "%FF%FE", "%C3", "%01%02%1B%7F", "x" * MIB]
# In a multipart form (the test client cannot encode a lone surrogate; a browser cannot send one:
# it arrives as the broken UTF-8 of QUERY_VALUES, posted urlencoded below).
FORM_VALUES = ["\x00", "a\x00b", "\x01\x02\x1b\x7f\x0b", "x" * MIB]
URLENCODED = "application/x-www-form-urlencoded"


def admin_paths_with_text() -> list[str]:
    """Every admin URL that takes text from the query: lists (search, ordering, page, filters)
    and the autocomplete of every registered model that has search fields."""
    paths = []
    for model in admin.site._registry:
        info = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        changelist = reverse(f"{info}_changelist")
        paths += [f"{changelist}?q={{v}}", f"{changelist}?o={{v}}", f"{changelist}?p={{v}}", f"{changelist}?{{v}}=1"]
        paths.append(reverse(f"{info}_change", args=["OBJ"]).replace("OBJ", "{v}"))
        paths.append(reverse(f"{info}_history", args=["OBJ"]).replace("OBJ", "{v}"))
        for field in model._meta.get_fields():
            remote = getattr(field, "related_model", None)
            searchable = remote in admin.site._registry and admin.site._registry[remote].search_fields
            if getattr(field, "many_to_one", False) and searchable:
                paths.append(
                    f"{reverse('admin:autocomplete')}?app_label={model._meta.app_label}"
                    f"&model_name={model._meta.model_name}&field_name={field.name}&term={{v}}"
                )
    return paths


def test_a_nul_in_the_admin_autocomplete_is_a_400_for_a_coach(seeded: None) -> None:
    coachee = make_coachee("zq_coachee")
    coach = make_coach("coach_ac", coachees=[coachee])
    client = Client(raise_request_exception=False)
    client.force_login(coach)
    url = f"{reverse('admin:autocomplete')}?app_label=agents&model_name=annotation&field_name=turn&term="
    assert client.get(url + "run").status_code == 200
    for value in ("%00", "%ED%A0%80", "%FF"):
        response = client.get(url + value)
        assert response.status_code == 400, value
        assert b"Bad request:" in response.content


def test_admin_and_page_text_the_database_cannot_store_is_a_400(seeded: None) -> None:
    root = get_user_model().objects.create_superuser("root", password="pw-for-tests-1")
    client = Client(raise_request_exception=False)
    client.force_login(root)
    assert client.get("/admin/agents/turn/?q=%00").status_code == 400
    assert client.get("/admin/agents/turn/%00/change/").status_code == 400
    assert client.post("/admin/agents/coachingmove/add/", {"key": "a\x00b", "name": "x"}).status_code == 400
    assert client.get("/sessions/?x=%00").status_code == 400
    cookie_client = Client(raise_request_exception=False, headers={"Cookie": "sessionid=a%00b"})
    assert cookie_client.get("/accounts/login/").status_code in (200, 400)
    # Ordinary text, control characters and all, still works.
    assert client.get("/admin/agents/turn/?q=caf%C3%A9%09").status_code == 200


# --- Per-address limits on the account pages ----------------------------------------------------


def signup_form(i: int) -> dict[str, str]:
    return {"username": f"new{i}", "password1": "a-Long-pass-1234", "password2": "a-Long-pass-1234"}


def test_sign_up_is_throttled_per_address(seeded: None, settings: Any) -> None:
    statuses = []
    for i in range(20):
        client = Client(REMOTE_ADDR="203.0.113.7")
        statuses.append(client.post(reverse("signup"), signup_form(i)).status_code)
    limit = settings.COACHING_SIGNUPS_PER_ADDRESS
    assert statuses[:limit] == [302] * limit
    assert set(statuses[limit:]) == {429}
    assert get_user_model().objects.filter(username__startswith="new").count() == limit
    refused = Client(REMOTE_ADDR="203.0.113.7").post(reverse("signup"), signup_form(99))
    assert "Too many attempts from your address" in refused.content.decode()
    assert int(refused["Retry-After"]) > 0
    # Another address is not affected.
    assert Client(REMOTE_ADDR="198.51.100.2").post(reverse("signup"), signup_form(100)).status_code == 302


def test_failed_logins_across_usernames_are_throttled_per_address(seeded: None, settings: Any) -> None:
    victim = make_coachee("victim", password="the-right-password-1")
    limit = settings.COACHING_LOGIN_FAILURES_PER_ADDRESS
    names = (f"user{i}" for i in itertools.count())
    statuses = []
    for _ in range(limit + 5):
        client = Client(REMOTE_ADDR="203.0.113.9")
        form = {"username": next(names), "password": "Winter2026!"}
        statuses.append(client.post(reverse("login"), form).status_code)
    # Each username failed once only: django-axes alone (per username and address) never locks.
    assert statuses[:limit] == [200] * limit
    assert set(statuses[limit:]) == {429}
    # Even the right password is refused from this address for the window, not from others.
    right = {"username": "victim", "password": "the-right-password-1"}
    assert Client(REMOTE_ADDR="203.0.113.9").post(reverse("login"), right).status_code == 429
    assert Client(REMOTE_ADDR="198.51.100.3").post(reverse("login"), right).status_code == 302
    assert victim.pk


# --- Generated input over every text field of the pages and the admin ---------------------------


def page_forms(session_id: int) -> list[tuple[str, list[str]]]:
    return [
        (reverse("signup"), ["username", "password1", "password2"]),
        (reverse("login"), ["username", "password", "next"]),
        (reverse("password_change"), ["old_password", "new_password1", "new_password2"]),
        (reverse("memory"), ["item_id", "action", "text"]),
        (reverse("session-end", args=[session_id]), ["next"]),
        (reverse("account"), ["action", "password", "confirm"]),
    ]


def admin_add_forms(client: Client) -> list[tuple[str, list[str]]]:
    """Every admin add and change form, with the names of its text inputs as the page has them."""
    forms = []
    for model in admin.site._registry:
        info = f"admin:{model._meta.app_label}_{model._meta.model_name}"
        url = reverse(f"{info}_add")
        response = client.get(url)
        if response.status_code != 200 or response.context is None or "adminform" not in response.context:
            continue
        fields = list(response.context["adminform"].form.fields)
        forms.append((url, fields))
    return forms


def test_generated_input_over_every_page_and_admin_text_field_never_gets_a_500(seeded: None) -> None:
    root = get_user_model().objects.create_superuser("root", password="pw-for-tests-1")
    coachee = make_coachee("fuzzed")
    build_conversation("zq_fuzz_coachee", "ZQFUZZ", coach=make_coach("fuzz_coach"))
    session = sessions.session_start(user_id=coachee.pk)
    statuses: dict[int, int] = {}
    failures: list[str] = []

    def record(response: Any, what: str) -> None:
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        if response.status_code >= 500:
            failures.append(f"{response.status_code} {what[:160]}")

    admin_client = Client(raise_request_exception=False)
    admin_client.force_login(root)
    for path, value in itertools.product(admin_paths_with_text(), QUERY_VALUES):
        if len(value) == MIB and "q={v}" not in path and "term={v}" not in path:
            continue  # 1 MiB where text is searched for; elsewhere the short values cover the path
        record(admin_client.get(path.format(v=value)), path.format(v=value[:20]))
    forms = [(admin_client, form) for form in admin_add_forms(admin_client)]
    page_client = Client(raise_request_exception=False)
    forms += [(page_client, form) for form in page_forms(session.pk)]
    for client, (url, fields) in forms:
        if not fields:
            continue
        for value in FORM_VALUES:
            page_client.force_login(coachee)  # a generated logout or password change ends it
            record(client.post(url, dict.fromkeys(fields, value)), f"{url} {fields} {value[:20]!r}")
        for value in QUERY_VALUES:
            body = "&".join(f"{field}={value}" for field in fields)
            record(client.post(url, body, content_type=URLENCODED), f"{url} urlencoded {value[:20]!r}")
            record(client.get(f"{url}?{fields[0]}={value}"), f"{url}?{fields[0]}={value[:20]}")
    assert failures == [], "\n".join(failures[:30])
    assert sum(statuses.values()) > 1000
    assert statuses.get(400, 0) > 100  # the unstorable values were refused, not waved through
