"""The benchmark's messages are ordinary coaching talk: the crisis pre-gate must not answer one
with the card, or that coachee's later replies are held until checked (no stream) and Coach's
first token goes unmeasured. It did, unnoticed, for a day: see docs/crisis-safety.md, "A false
card in the benchmark's messages"."""

from __future__ import annotations

import pytest

from benchmarks import app
from benchmarks.load import MESSAGES

pytestmark = pytest.mark.django_db


def test_no_benchmark_message_is_read_as_crisis() -> None:
    assert app.messages_read_as_crisis(MESSAGES) == []


def test_a_crisis_message_among_them_is_named() -> None:
    crisis = "I have decided to end my life tonight, I have the pills ready."
    assert app.messages_read_as_crisis((*MESSAGES, crisis)) == [crisis]
