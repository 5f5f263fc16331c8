"""Crisis alerts to coaches, and the degraded-mode notice to the coachee."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core import mail

from agents.llm import breaker
from agents.models import AgentConfig, CoachAssignment, Escalation, SessionEvent, Turn
from agents.roles.schemas import SERVER_EVENTS
from agents.turns import accept, crisis, dispatch, finish, progress, sessions
from tests.support.people import make_coachee

pytestmark = pytest.mark.timeout(60)


CANARY = "CANARY-9c1e-crisis-alert"


@pytest.fixture
def coachee(seeded: None, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    user = make_coachee()
    for name in ("coach-a", "coach-b"):
        coach = get_user_model().objects.create_user(username=name, email=f"{name}@example.org", is_staff=True)
        CoachAssignment.objects.create(coach=coach, coachee=user)
    # Assigned to someone else: must not be told.
    other = get_user_model().objects.create_user(username="coach-c", email="coach-c@example.org", is_staff=True)
    CoachAssignment.objects.create(coach=other, coachee=make_coachee("someone-else"))
    return user


def accepted_turn(user: Any, text: str, client_id: str = "c-1") -> Turn:
    session = sessions.session_start(user_id=user.pk)
    result = accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id=client_id, text=text)
    return Turn.objects.select_related("session").get(pk=result.turn_id)


def test_a_pregate_hit_emails_each_assigned_coach_without_the_message_text(
    coachee: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        turn = accepted_turn(coachee, f"I want to kill myself {CANARY}")
    assert turn.escalation == Escalation.CRISIS
    assert turn.flagged is True
    assert turn.flag_reason.startswith("crisis language")
    assert sorted(to for m in mail.outbox for to in m.to) == ["coach-a@example.org", "coach-b@example.org"]
    assert all(len(m.to) == 1 for m in mail.outbox)  # coaches do not see each other's addresses
    for message in mail.outbox:
        assert f"session {turn.session_id}, turn {turn.pk}" in message.subject
        assert f"/review/?turn={turn.pk}#turn-{turn.pk}" in message.body
        for part in (message.subject, message.body):
            assert CANARY not in part
            assert "kill" not in part


def test_the_alert_goes_once_per_turn(coachee: Any, django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        turn = accepted_turn(coachee, "Je veux en finir")
    assert len(mail.outbox) == 2
    # Stability escalates the same turn later, and a redelivered task does it again.
    with django_capture_on_commit_callbacks(execute=True):
        crisis.safety_notice_emit(turn=turn, level=Escalation.CRISIS)
    assert crisis.coach_alert_crisis(turn_id=turn.pk) == 0
    assert len(mail.outbox) == 2


def test_stabilitys_crisis_escalation_alerts_too_but_refer_does_not(
    coachee: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        turn = accepted_turn(coachee, "I keep skipping my runs.")
    assert mail.outbox == []
    with django_capture_on_commit_callbacks(execute=True):
        crisis.safety_notice_emit(turn=turn, level=Escalation.REFER)
    assert mail.outbox == []
    turn.refresh_from_db()
    assert turn.flagged is False
    with django_capture_on_commit_callbacks(execute=True):
        crisis.safety_notice_emit(turn=turn, level=Escalation.CRISIS)
    assert len(mail.outbox) == 2
    turn.refresh_from_db()
    assert turn.flagged is True
    assert turn.flag_reason == "crisis (Stability)"


def test_no_alert_is_sent_before_the_turn_commits(coachee: Any, django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        accepted_turn(coachee, "I want to die")
    assert mail.outbox == []
    assert callbacks  # queued for after the commit


def test_a_coachee_without_coaches_still_gets_the_crisis_reply(
    seeded: None, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    with django_capture_on_commit_callbacks(execute=True):
        turn = accepted_turn(make_coachee("alone"), "Quiero morir")
    assert mail.outbox == []
    types = list(SessionEvent.objects.filter(session_id=turn.session_id).values_list("type", flat=True))
    assert types == ["message.accepted", "safety.notice", "coach.done"]


def test_a_failing_mail_server_does_not_break_the_accept(
    coachee: Any, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    settings.EMAIL_BACKEND = "tests.unit.test_coach_alert.BrokenBackend"
    with django_capture_on_commit_callbacks(execute=True):
        turn = accepted_turn(coachee, "I want to end it all")
    assert turn.flagged is True
    # Not remembered as sent: a later crisis signal on the turn tries again.
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert crisis.coach_alert_crisis(turn_id=turn.pk) == 2


class BrokenBackend:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def send_messages(self, messages: Any) -> int:
        raise ConnectionRefusedError("no mail server")


@pytest.fixture
def open_breakers(settings: Any) -> Any:
    settings.COACHING_LLM_BREAKER_THRESHOLD = 1
    breaker.reset_all()
    yield
    breaker.reset_all()


def degraded_events(turn: Turn) -> list[dict[str, Any]]:
    return list(
        SessionEvent.objects.filter(session_id=turn.session_id, type="service.degraded").values_list(
            "payload", flat=True
        )
    )


def test_an_open_breaker_tells_the_coachee_once_per_turn(coachee: Any, open_breakers: None) -> None:
    turn = accepted_turn(coachee, "I keep skipping my runs.")
    assert finish.degraded_notice_if_open(turn_id=turn.pk) is False  # all closed: nothing said
    endpoint = AgentConfig.objects.select_related("endpoint").get(agent="persona").endpoint
    breaker.for_endpoint(endpoint.name).record_failure()
    assert finish.degraded_notice_if_open(turn_id=turn.pk) is True
    assert finish.degraded_notice_if_open(turn_id=turn.pk) is False
    assert finish.degraded_notice_emit(turn_id=turn.pk, reason="coach_failed") is False
    [event] = degraded_events(turn)
    SERVER_EVENTS["service.degraded"].model_validate(event)
    assert event["reason"] == "endpoint_unavailable"
    assert "saved" in event["text"]
    assert event["seq"] > 0  # persisted with a seq: replayed on resume


def test_a_failed_agent_on_an_open_endpoint_triggers_the_notice(coachee: Any, open_breakers: None) -> None:
    turn = accepted_turn(coachee, "I keep skipping my runs.")
    progress.agent_status_emit(turn=turn, agent="persona", state="failed")
    assert degraded_events(turn) == []  # failed for another reason: the turn.done says enough
    endpoint = AgentConfig.objects.select_related("endpoint").get(agent="persona").endpoint
    breaker.for_endpoint(endpoint.name).record_failure()
    progress.agent_status_emit(turn=turn, agent="persona", state="failed")
    assert len(degraded_events(turn)) == 1


def test_no_notice_for_a_turn_that_has_ended(coachee: Any, open_breakers: None) -> None:
    turn = accepted_turn(coachee, "I keep skipping my runs.")
    finish.turn_finish(turn_id=turn.pk, reply="Done.", fallback=False, degraded=False)
    assert finish.degraded_notice_emit(turn_id=turn.pk, reason="coach_failed") is False
