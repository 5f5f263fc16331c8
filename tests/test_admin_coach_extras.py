"""A coach searches the conversations of their own coachees (and nobody else's), and sees the
exact prompt each agent of a turn was sent."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from django.utils.html import escape

from agents import pipeline, privacy
from agents.llm.simulator import SimulatorServer
from tests.test_admin_coach import build_conversation, logged_in, make_coach
from tests.test_prompt_ops import on_sim, stored_turn  # noqa: F401 (on_sim: a fixture)

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
    on_sim: SimulatorServer,  # noqa: F811 (the fixture imported above)
) -> None:
    run = stored_turn("cara_p", text="I keep skipping my runs. PROMPT-CANARY")
    turn = run.turn
    coach = make_coach("coach_p", coachees=[turn.session.coachee])
    client = logged_in(coach)
    url = reverse("admin:agents_coachingsession_review", args=[turn.session_id])

    opened = client.get(url, {"turn": turn.pk}).content.decode()
    assert run.prompt_version is not None
    sent = pipeline.instructions_for(run.prompt_version.body, run.prompt_values, run.extra_instructions)
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
