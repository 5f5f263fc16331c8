"""The crisis pre-gate: multilingual crisis language is recognised with no model involved."""

from __future__ import annotations

import pytest

from agents.models import CrisisPattern
from agents.safety import pregate, replies

pytestmark = pytest.mark.django_db

CRISIS = [
    "I want to kill myself",
    "Honestly I've been thinking about suicide a lot",
    "I don\u2019t want to live anymore",  # typographic apostrophe
    "Sometimes I think everyone would be better off dead without me... I mean I'd be better off dead",
    "I keep cutting myself when it gets bad",
    "I just want to end it all",
    "Ich will mich umbringen",
    "Ich möchte nicht mehr leben",
    "Je veux me suicider",
    "je n'ai plus envie de vivre",
    "Quiero morir",
    "No quiero vivir más",
    "I WANT TO DIE",
    "".join(chr(ord(c) + 0xFEE0) for c in "suicide"),  # full-width letters
]
NOT_CRISIS = [
    "This deadline is killing me",
    "I could die of laughter at that meeting",
    "I want to run three times a week",
    "My phone battery died again",
    "I'm dead tired after work",
    "Ich bin total müde",
    "Je suis fatigué de ce projet",
    "Quiero dormir más",
]


@pytest.mark.parametrize("text", CRISIS)
def test_crisis_language_is_recognised(seeded: None, text: str) -> None:
    assert pregate.pregate(text) is not None


@pytest.mark.parametrize("text", NOT_CRISIS)
def test_everyday_language_is_not_flagged(seeded: None, text: str) -> None:
    assert pregate.pregate(text) is None


def test_inactive_and_broken_patterns_are_skipped(seeded: None) -> None:
    CrisisPattern.objects.update(active=False)
    assert pregate.pregate("I want to kill myself") is None
    CrisisPattern.objects.create(locale="en", pattern="(unclosed", active=True)
    row = CrisisPattern.objects.create(locale="en", pattern=r"\bpurple elephant\b", active=True)
    assert pregate.pregate("a purple elephant") == pregate.CrisisMatch("en", r"\bpurple elephant\b", row.pk, "suicide")


def test_the_reply_follows_the_sessions_language() -> None:
    assert "112" in replies.crisis_reply("de-AT")
    assert replies.crisis_reply("xx") == replies.CRISIS_REPLIES["en"]
    assert set(replies.CRISIS_REPLIES) == set(replies.ABUSE_REPLIES) == set(replies.CARD_TEXTS)
    assert {"en", "ru", "de", "pt", "fr", "es"} <= set(replies.CRISIS_REPLIES)
    fixed = (replies.CRISIS_REPLIES, replies.ABUSE_REPLIES, replies.SOMEONE_ELSE_REPLIES)
    for reply in (reply for by_language in fixed for reply in by_language.values()):
        assert any(word in reply for word in ("AI", "IA", "KI", "ИИ"))
