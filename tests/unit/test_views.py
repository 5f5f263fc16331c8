"""The coachee's pages: accounts, sessions, ending a session, the memory page."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from agents.memory import blackboard
from agents.models import BlackboardVersion, CoachingSession, SessionEvent, SessionStatus
from agents.turns import accept, crisis, dispatch, event_log, sessions
from tests.support.people import coachee_client, make_coachee
from tests.support.turns import shadow_findings

pytestmark = pytest.mark.django_db


@pytest.fixture
def closed_sockets(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    closed: list[int] = []
    monkeypatch.setattr(event_log, "user_sockets_close", lambda *, user_id, code=4001: closed.append(user_id))
    return closed


def test_signup_creates_an_account_and_logs_in(seeded: None) -> None:
    client = Client()
    response = client.post(
        reverse("signup"),
        {"username": "newcomer", "password1": "a-Long-pass-phrase-42", "password2": "a-Long-pass-phrase-42"},
    )
    assert response.status_code == 302
    assert get_user_model().objects.filter(username="newcomer").exists()
    assert client.get(reverse("chat-home")).status_code == 302  # on to a session, not to the login page
    assert CoachingSession.objects.filter(coachee__username="newcomer").count() == 1


def test_signup_shows_errors(seeded: None) -> None:
    response = Client().post(reverse("signup"), {"username": "x", "password1": "abc", "password2": "abd"})
    assert response.status_code == 200
    assert b'role="alert"' in response.content
    assert not get_user_model().objects.filter(username="x").exists()


def test_logout_closes_the_users_sockets(seeded: None, closed_sockets: list[int]) -> None:
    client, user = coachee_client()
    client.post(reverse("logout"))
    assert closed_sockets == [user.pk]


def test_password_change_closes_the_users_sockets(seeded: None, closed_sockets: list[int]) -> None:
    client, user = coachee_client()
    user.set_password("old-pass-phrase-42")
    user.save()
    client.force_login(user)
    response = client.post(
        reverse("password_change"),
        {
            "old_password": "old-pass-phrase-42",
            "new_password1": "new-Pass-phrase-43",
            "new_password2": "new-Pass-phrase-43",
        },
    )
    assert response.status_code == 302
    assert closed_sockets == [user.pk]
    user.refresh_from_db()
    assert user.check_password("new-Pass-phrase-43")


def test_session_list_shows_first_words(seeded: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    client, user = coachee_client()
    session = sessions.session_start(user_id=user.pk)
    accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id="a", text="I want to sleep earlier")
    response = client.get(reverse("session-list"))
    assert b"I want to sleep earlier" in response.content
    assert b"Continue" in response.content


def test_ending_a_session_announces_it_and_refuses_new_messages(seeded: None) -> None:
    client, user = coachee_client()
    session = sessions.session_start(user_id=user.pk)
    response = client.post(reverse("session-end", args=[session.pk]))
    assert response.status_code == 302
    session.refresh_from_db()
    assert session.status == SessionStatus.ENDED
    assert SessionEvent.objects.filter(session=session, type="session.ended").count() == 1
    with pytest.raises(accept.SessionClosedError):
        accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id="late", text="hello?")


def test_another_coachees_session_is_not_found(seeded: None) -> None:
    _, owner = coachee_client("owner")
    session = sessions.session_start(user_id=owner.pk)
    intruder, _ = coachee_client("intruder")
    assert intruder.get(reverse("chat-session", args=[session.pk])).status_code == 404
    assert intruder.post(reverse("session-end", args=[session.pk])).status_code == 404
    session.refresh_from_db()
    assert session.status == SessionStatus.OPEN


def test_memory_page_corrects_and_hides_items(seeded: None) -> None:
    client, user = coachee_client()
    data = blackboard.merge_shadow(blackboard.empty(), shadow_findings(), turn_id=7, at="2026-11-30T10:00:00")
    BlackboardVersion.objects.create(coachee=user, version=1, data=data)
    goal = data["stated_goals"][0]
    priority = data["revealed_priorities"][0]

    page = client.get(reverse("memory"))
    assert b"Run three times a week" in page.content
    assert b"Work comes first" in page.content

    client.post(reverse("memory"), {"item_id": goal["id"], "action": "correct", "text": "Run twice a week"})
    client.post(reverse("memory"), {"item_id": priority["id"], "action": "hide"})

    latest = BlackboardVersion.objects.filter(coachee=user).order_by("-version").first()
    assert latest is not None
    assert latest.version == 3
    assert latest.edited_by_id == user.pk
    rendered = blackboard.render(latest.data)
    assert "Run twice a week" in rendered
    assert "Work comes first" not in rendered  # hidden items reach no agent
    assert latest.data["stated_goals"][0]["original_text"] == "Run three times a week"


def test_memory_page_cannot_touch_another_coachees_items(seeded: None) -> None:
    _, owner = coachee_client("owner")
    data = blackboard.merge_shadow(blackboard.empty(), shadow_findings(), turn_id=1, at="2026-11-30T10:00:00")
    BlackboardVersion.objects.create(coachee=owner, version=1, data=data)
    intruder, _ = coachee_client("intruder")
    response = intruder.post(
        reverse("memory"), {"item_id": data["stated_goals"][0]["id"], "action": "hide"}, follow=True
    )
    assert b"cannot be changed" in response.content
    assert BlackboardVersion.objects.filter(coachee=owner).count() == 1


def test_crisis_resources_fall_back_to_language_then_the_international_ones(seeded: None) -> None:
    # Seeded by migrations 0004 and 0018.
    assert crisis.crisis_resources_for("de-AT")[0]["contact"] == "112"
    unknown = crisis.crisis_resources_for("xx")
    assert any("findahelpline.com" in r["url"] for r in unknown)
    assert "emergency" in unknown[0]["description"].lower()
    assert any(r["contact"] == "188" for r in crisis.crisis_resources_for("pt-BR"))  # CVV, Brazil
    assert not any(r["contact"] == "188" for r in crisis.crisis_resources_for("pt"))  # Portugal
    assert any("112" in r["contact"] for r in crisis.crisis_resources_for("ru"))


def test_abuse_resources_come_first_for_abuse(seeded: None) -> None:
    for locale, line in [("de", "116 016"), ("fr", "3919"), ("es", "016"), ("pt-BR", "180"), ("ru", "8-800-7000-600")]:
        resources = crisis.crisis_resources_for(locale, "abuse")
        assert resources[0]["contact"] == line, locale
        assert all(r["contact"] != line for r in crisis.crisis_resources_for(locale)), locale


def test_every_seeded_resource_names_its_public_source(seeded: None) -> None:
    from agents.models import CrisisResource

    assert not CrisisResource.objects.filter(source_url="").exists()


def test_the_session_locale_is_the_account_setting_else_the_browsers(seeded: None) -> None:
    user = get_user_model().objects.create_user(username="polyglot", password="pw-for-tests-1")
    assert sessions.preferred_locale(user_id=user.pk, accept_language="pt-br,pt;q=0.9,en;q=0.8") == "pt-BR"
    assert sessions.preferred_locale(user_id=user.pk, accept_language="it-IT,ru;q=0.5") == "ru"
    assert sessions.preferred_locale(user_id=user.pk, accept_language="it-IT") == "it-IT"
    assert sessions.preferred_locale(user_id=user.pk, accept_language="") == sessions.UNKNOWN_LOCALE
    client = Client()
    client.force_login(user)
    client.post(reverse("account"), {"locale": "ru"})
    assert sessions.preferred_locale(user_id=user.pk, accept_language="de") == "ru"
    client.post(reverse("session-new"), HTTP_ACCEPT_LANGUAGE="de")
    assert CoachingSession.objects.filter(coachee=user).latest("created_at").locale == "ru"
    client.post(reverse("account"), {"locale": ""})
    client.post(reverse("session-new"), HTTP_ACCEPT_LANGUAGE="de-CH,de;q=0.9")
    assert CoachingSession.objects.filter(coachee=user).latest("created_at").locale == "de-CH"


def test_logins_are_throttled_after_repeated_failures(seeded: None, settings: Any) -> None:
    username = f"target-{uuid.uuid4().hex[:8]}"  # the failure count lives in Redis, shared by tests
    make_coachee(username, "right-pass-phrase-1")
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        response = client.post(reverse("login"), {"username": username, "password": "wrong"})
        assert response.status_code == 200  # the form again, with its error
    last_try = client.post(reverse("login"), {"username": username, "password": "wrong"})
    assert last_try.status_code == 429  # the failure that reaches the limit locks the pair out
    locked = client.post(reverse("login"), {"username": username, "password": "right-pass-phrase-1"})
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session
    # Another address is not locked out for this username.
    other = Client(REMOTE_ADDR="10.9.8.7")
    ok = other.post(reverse("login"), {"username": username, "password": "right-pass-phrase-1"})
    assert ok.status_code == 302
