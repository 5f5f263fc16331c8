"""A coach finds an alarm false, a crisis card or an escalation the agents raised: the card, its
signal and the escalation stay on the turn for the record, the coachee's later immediate replies
are no longer held for it, and only a coach who may annotate that coachee's turns can say so."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agents.models import Escalation, Message, Role, Turn
from agents.pipeline import reply_gate
from agents.review.annotations import DismissalRefusedError, alarm_dismiss
from agents.safety import quality
from tests.support.conversations import Conversation, build_conversation
from tests.support.metrics import scraped
from tests.support.people import logged_in, make_coach

SIGNAL = {"layer": "classifier", "level": "crisis", "score": 0.81, "category": "eating", "features": ["not", "enough"]}


@pytest.fixture
def coach(seeded: None) -> Any:
    return make_coach("coach_lee")


@pytest.fixture
def convo(coach: Any) -> Conversation:
    return build_conversation("gym_goer", "MKGYM", coach=coach)


def carded(turn: Turn) -> Turn:
    """The turn as the pre-gate leaves one it answered with the card."""
    turn.escalation, turn.crisis_signal, turn.flagged = Escalation.CRISIS, SIGNAL, True
    turn.save(update_fields=["escalation", "crisis_signal", "flagged"])
    return turn


def next_turn(convo: Conversation) -> Turn:
    session = convo.sessions[-1]
    seq = Message.objects.filter(session=session).order_by("-seq").values_list("seq", flat=True).first() or 0
    message = Message.objects.create(session=session, seq=seq + 1, role=Role.USER, text="Back from the gym again.")
    return Turn.objects.create(session=session, user_message=message, deadline_at=timezone.now() + timedelta(minutes=3))


def test_a_dismissed_card_no_longer_holds_the_coachees_replies(
    convo: Conversation, coach: Any, django_capture_on_commit_callbacks: Any
) -> None:
    for turn in convo.turns:  # the fixture's own escalation is Stability's, not a card: none here
        Turn.objects.filter(pk=turn.pk).update(escalation=Escalation.NONE)
    card = carded(convo.turns[0])
    later = next_turn(convo)
    assert reply_gate.risks_known(later, quality.Expectations())

    counted = scraped("coaching_crisis_dismissals_total", layer="classifier", category="eating")
    with django_capture_on_commit_callbacks(execute=True):
        alarm_dismiss(turn_id=card.pk, author_id=coach.pk, note="About a workout, not about food.")
    # Counted once it is committed, by the layer that gave the card.
    assert scraped("coaching_crisis_dismissals_total", layer="classifier", category="eating") == counted + 1

    card.refresh_from_db()
    assert card.crisis_dismissed_by_id == coach.pk
    assert card.crisis_dismissal_note == "About a workout, not about food."
    assert (card.escalation, card.crisis_signal, card.flagged) == (Escalation.CRISIS, SIGNAL, True)  # the record stays
    assert not reply_gate.risks_known(later, quality.Expectations())
    # Another card, not dismissed, holds them again.
    carded(convo.turns[1])
    assert reply_gate.risks_known(later, quality.Expectations())


@pytest.mark.parametrize("note", ["", "   "])
def test_a_dismissal_says_why(convo: Conversation, coach: Any, note: str) -> None:
    card = carded(convo.turns[0])
    with pytest.raises(DismissalRefusedError, match="Say why"):
        alarm_dismiss(turn_id=card.pk, author_id=coach.pk, note=note)
    card.refresh_from_db()
    assert card.crisis_dismissed_at is None


def test_only_an_alarm_and_only_once(convo: Conversation, coach: Any) -> None:
    quiet = convo.turns[2]
    for level in (Escalation.NONE, Escalation.MONITOR):  # "keep an eye on" holds nothing
        Turn.objects.filter(pk=quiet.pk).update(escalation=level)
        with pytest.raises(DismissalRefusedError, match="raised no alarm"):
            alarm_dismiss(turn_id=quiet.pk, author_id=coach.pk, note="nothing to dismiss")
    card = carded(convo.turns[0])
    alarm_dismiss(turn_id=card.pk, author_id=coach.pk, note="first")
    with pytest.raises(DismissalRefusedError, match="already"):
        alarm_dismiss(turn_id=card.pk, author_id=coach.pk, note="second")
    card.refresh_from_db()
    assert card.crisis_dismissal_note == "first"


def test_the_coach_marks_it_on_the_review_page(convo: Conversation, coach: Any) -> None:
    card = carded(convo.turns[0])
    client = logged_in(coach)
    review = reverse("admin:agents_coachingsession_review", args=[card.session_id]) + f"?turn={card.pk}"
    url = reverse("admin:agents_coachingsession_crisis_dismiss", args=[card.session_id, card.pk])
    assert url in client.get(review).content.decode()  # the form, beside the card

    assert client.get(url).status_code == 405
    response = client.post(url, {"note": "About a workout, not about food."})
    assert response.status_code == 302
    card.refresh_from_db()
    assert card.crisis_dismissed_by_id == coach.pk
    assert LogEntry.objects.filter(object_id=str(card.pk), change_message__contains="false alarm").exists()
    page = client.get(review).content.decode()
    assert "Found a false alarm by coach_lee" in page
    assert url not in page  # no form once it is done


def test_an_escalation_the_agents_raised_is_dismissed_on_the_review_page(
    convo: Conversation, coach: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """Stability's risk, through arbitration, escalated a turn with no card: it holds the
    coachee's later replies like a card, and a coach can find it a false alarm the same way."""
    for turn in convo.turns:
        Turn.objects.filter(pk=turn.pk).update(escalation=Escalation.NONE)
    raised = convo.turns[0]
    Turn.objects.filter(pk=raised.pk).update(escalation=Escalation.REFER)
    later = next_turn(convo)
    assert reply_gate.risks_known(later, quality.Expectations())

    client = logged_in(coach)
    review = reverse("admin:agents_coachingsession_review", args=[raised.session_id]) + f"?turn={raised.pk}"
    url = reverse("admin:agents_coachingsession_crisis_dismiss", args=[raised.session_id, raised.pk])
    page = client.get(review).content.decode()
    assert url in page
    assert "Mark the escalation a false alarm" in page
    counted = scraped("coaching_crisis_dismissals_total", layer="agents", category="other")
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(url, {"note": "Asked about a friend's diet, no risk to them."}).status_code == 302
    assert scraped("coaching_crisis_dismissals_total", layer="agents", category="other") == counted + 1

    raised.refresh_from_db()
    assert (raised.escalation, raised.crisis_signal, raised.crisis_dismissed_by_id) == (
        Escalation.REFER,
        None,
        coach.pk,
    )
    assert LogEntry.objects.filter(
        object_id=str(raised.pk), change_message="Found its escalation a false alarm."
    ).exists()
    assert not reply_gate.risks_known(later, quality.Expectations())
    page = client.get(review).content.decode()
    assert "Found a false alarm by coach_lee" in page
    assert url not in page


def test_the_turn_list_finds_standing_cards_and_false_alarms(convo: Conversation, coach: Any) -> None:
    standing, dismissed = carded(convo.turns[0]), carded(convo.turns[1])
    alarm_dismiss(turn_id=dismissed.pk, author_id=coach.pk, note="About a workout, not about food.")
    client = logged_in(coach)
    changelist = reverse("admin:agents_turn_changelist")

    def listed(value: str) -> set[int]:
        page = client.get(f"{changelist}?crisis_card={value}").content.decode()
        return {turn.pk for turn in convo.turns if f"?turn={turn.pk}#" in page}

    assert listed("standing") == {standing.pk}
    assert listed("false_alarm") == {dismissed.pk}
    assert "crisis card found a false alarm" in client.get(f"{changelist}?crisis_card=false_alarm").content.decode()


def test_a_coach_of_someone_else_cannot(convo: Conversation, seeded: None) -> None:
    card = carded(convo.turns[0])
    stranger = make_coach("coach_far")
    own = build_conversation("own_coachee", "MKOWN", coach=stranger)
    client = logged_in(stranger)
    # Their turn under their session's URL, and under one of the stranger's own sessions.
    for session_id in (card.session_id, own.sessions[0].pk):
        url = reverse("admin:agents_coachingsession_crisis_dismiss", args=[session_id, card.pk])
        assert client.post(url, {"note": "not mine to judge"}).status_code == 404
    card.refresh_from_db()
    assert card.crisis_dismissed_at is None


def test_an_anonymous_visitor_is_sent_to_log_in(convo: Conversation) -> None:
    card = carded(convo.turns[0])
    url = reverse("admin:agents_coachingsession_crisis_dismiss", args=[card.session_id, card.pk])
    response = Client().post(url, {"note": "x"})
    assert response.status_code == 302
    assert "login" in response["Location"]
    card.refresh_from_db()
    assert card.crisis_dismissed_at is None
