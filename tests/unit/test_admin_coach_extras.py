"""A coach searches the conversations of their own coachees (and nobody else's), and sees the
exact prompt each agent of a turn was sent."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from agents import privacy
from agents.llm.simulator.server import SimulatorServer
from agents.models import Escalation, Turn
from agents.pipeline import runner
from tests.support.conversations import build_conversation
from tests.support.people import logged_in, make_coach
from tests.support.turns import stored_turn

pytestmark = pytest.mark.django_db


def test_a_coach_finds_words_in_their_coachees_conversations_only(seeded: None) -> None:
    coach = make_coach("coach_s")
    mine = build_conversation("ana_s", "MARKER-ANA", coach=coach)
    theirs = build_conversation("ben_s", "MARKER-BEN", coach=make_coach("coach_t"))
    client = logged_in(coach)
    url = reverse("admin:agents_coachingsession_coachees")

    response = client.get(url, {"q": "marker-ana"})
    hits: list[Any] = response.context["hits"]
    assert hits, "the coachee's own words are found"
    assert {hit.session.coachee_id for hit in hits} == {mine.coachee.pk}
    assert any(hit.who == "ana_s" for hit in hits)  # their words are named by their name
    html = response.content.decode()
    assert 'id="search-results"' in html
    assert "MARKER-BEN" not in html

    # Another coach's coachee: the same kind of words, never found.
    assert client.get(url, {"q": "MARKER-BEN"}).context["hits"] == []
    assert theirs.coachee.get_username() not in client.get(url, {"q": "MARKER"}).content.decode()
    # Too short to mean anything: no search at all.
    assert client.get(url, {"q": "m"}).context["hits"] == []


def test_the_session_review_shows_the_exact_prompt_each_agent_was_sent(
    on_sim: SimulatorServer,
) -> None:
    run = stored_turn("cara_p", text="I keep skipping my runs. PROMPT-CANARY")
    turn = run.turn
    coach = make_coach("coach_p", coachees=[turn.session.coachee])
    client = logged_in(coach)
    url = reverse("admin:agents_coachingsession_review", args=[turn.session_id])

    opened = client.get(url, {"turn": turn.pk}).content.decode()
    assert run.prompt_version is not None
    sent = runner.instructions_for(run.prompt_version.body, run.prompt_values, run.extra_instructions)
    assert escape(sent) in opened  # the agent's own part, as it was sent
    assert escape(turn.shared_prompt) in opened  # and the shared part, once
    assert "PROMPT-CANARY" in turn.shared_prompt
    # A closed turn links to them rather than carrying every prompt of the session.
    assert escape(sent) not in client.get(url).content.decode()
    # After the retention period the stored inputs are gone, and the page says so.
    privacy.raw_outputs_prune(older_than_days=-1)
    pruned = client.get(url, {"turn": turn.pk}).content.decode()
    assert "no longer kept (older than the retention period)" in pruned
    assert "PROMPT-CANARY" not in pruned.split('class="transcript"')[1].split("Each agent")[1]


def test_the_inbox_shows_what_is_new_since_the_coach_last_looked(seeded: None) -> None:
    coach = make_coach("coach_i")
    mine = build_conversation("dana_i", "MARKER-DANA", coach=coach)
    build_conversation("eli_i", "MARKER-ELI", coach=make_coach("coach_j"))
    client = logged_in(coach)
    url = reverse("admin:agents_coachingsession_coachees")

    first = client.get(url).context["inbox"]  # never marked: the last week is new
    (row,) = first.rows
    assert row.coachee == mine.coachee
    assert row.new_turns == len(mine.turns)
    assert row.new_in_queue >= 1  # the escalated and the degraded turns are for review

    drawn_at = client.get(url).context["drawn_at"]
    assert client.post(reverse("admin:agents_coachingsession_inbox_seen"), {"drawn_at": drawn_at}).status_code == 302
    assert client.get(url).context["inbox"].empty

    # A turn after the mark: new again, escalated.
    later = timezone.now() + timedelta(seconds=1)
    Turn.objects.filter(pk=mine.turns[-1].pk).update(started_at=later, escalation=Escalation.CRISIS)
    (row,) = client.get(url).context["inbox"].rows
    assert (row.coachee, row.new_turns, row.new_escalations) == (mine.coachee, 1, 1)
    html = client.get(url).content.decode()
    assert 'data-coachee="dana_i"' in html
    assert "eli_i" not in html
    # Nonsense in the form marks up to now, never fails.
    seen_url = reverse("admin:agents_coachingsession_inbox_seen")
    assert client.post(seen_url, {"drawn_at": "2026-13-45T99:00"}).status_code == 302
