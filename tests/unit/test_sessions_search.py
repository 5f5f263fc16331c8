"""Session titles (from the first words, renamed by the coachee) and search across the
coachee's own conversations."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents.models import CoachingSession, Message, Role
from agents.turns import accept, sessions
from tests.support.people import coachee_client

pytestmark = pytest.mark.django_db


def session_with(user_id: int, *texts: str) -> CoachingSession:
    session = sessions.session_start(user_id=user_id)
    for n, text in enumerate(texts):
        accept.turn_accept(session_id=session.pk, user_id=user_id, client_id=f"s{session.pk}-{n}", text=text)
    return session


def test_a_session_is_named_after_its_first_words_until_renamed(seeded: None) -> None:
    client, user = coachee_client()
    long_first = "I keep putting off the hard conversation with my manager about the project deadline"
    session = session_with(user.pk, long_first, "Second thought")
    empty = sessions.session_start(user_id=user.pk)
    page = client.get(reverse("chat-session", args=[session.pk])).content.decode()
    title = "I keep putting off the hard conversation with my manager…"  # cut at a word
    assert f'<h1 id="chat-title" class="chat-title">{title}</h1>' in page
    assert "New session" in client.get(reverse("chat-session", args=[empty.pk])).content.decode()

    client.post(reverse("session-title", args=[session.pk]), {"title": "  Talking to   my manager "})
    session.refresh_from_db()
    assert session.title == "Talking to my manager"
    listing = client.get(reverse("session-list")).content.decode()
    assert "<td>Talking to my manager</td>" in listing
    # An empty title goes back to the first words.
    client.post(reverse("session-title", args=[session.pk]), {"title": ""})
    assert sessions.session_title(CoachingSession.objects.get(pk=session.pk)).startswith("I keep putting")


def test_nobody_renames_another_coachees_session(seeded: None) -> None:
    _, owner = coachee_client("owner")
    session = session_with(owner.pk, "Mine")
    intruder, _ = coachee_client("intruder")
    assert intruder.post(reverse("session-title", args=[session.pk]), {"title": "Hijacked"}).status_code == 404
    session.refresh_from_db()
    assert session.title == ""


def test_search_finds_words_in_ones_own_conversations_only(seeded: None) -> None:
    client, user = coachee_client()
    _, other = coachee_client("other")
    older = session_with(user.pk, "Running is hard in winter")
    newer = session_with(user.pk, "Work again", "My marathon plan slipped")
    session_with(other.pk, "My marathon secret")
    sessions.session_title_set(session_id=older.pk, user_id=user.pk, title="Winter marathon")
    Message.objects.create(session=newer, seq=99, role=Role.SYNTH, text="A marathon needs rest days too.")

    hits = sessions.session_search(user_id=user.pk, query="MARATHON")
    found = [(h.session.pk, h.who, h.message_seq is None) for h in hits]
    assert (older.pk, "", True) in found  # the title
    assert [(s, who) for s, who, title in found if not title] == [(newer.pk, "You"), (newer.pk, "Full answer")]
    assert all(h.session.coachee_id == user.pk for h in hits)
    assert sessions.session_search(user_id=user.pk, query="m") == []  # too short to mean anything

    html = client.get(reverse("session-list"), {"q": "marathon"}).content.decode()
    assert "3 matches for “marathon”" in html
    seq = Message.objects.get(session=newer, text="My marathon plan slipped").seq
    assert f'href="{reverse("chat-session", args=[newer.pk])}#msg-{seq}"' in html
    assert "secret" not in html


def test_snippets_show_the_words_around_the_match() -> None:
    text = "word " * 80 + "the needle is here " + "tail " * 80
    cut = sessions.snippet(text, "needle")
    assert "the needle is here" in cut
    assert cut.startswith("…")
    assert cut.endswith("…")
    assert len(cut) <= sessions.SNIPPET_CHARS + 2
