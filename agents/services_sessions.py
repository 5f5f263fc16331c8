"""A coachee's sessions as they find them again: titles (named after the first words unless
the coachee renamed it) and search across their own conversations.

Apart from services.py (the turn's hot path): nothing here runs during a turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

from agents import selectors
from agents.models import CoachingSession, Message, Role

TITLE_CHARS = 120  # CoachingSession.title
TITLE_FROM_WORDS = 60  # a title made from the first message: about a line in the sidebar
SEARCH_RESULTS = 50
SNIPPET_CHARS = 160
MIN_QUERY_CHARS = 2
ROLE_WORDS = {Role.USER: "You", Role.COACH: "Coach", Role.SYNTH: "Full answer"}


def title_from_words(first_words: str | None) -> str:
    """A session's title from its first message: the first line, cut at a word."""
    words = " ".join((first_words or "").split())
    if not words:
        return "New session"
    if len(words) <= TITLE_FROM_WORDS:
        return words
    cut = words[:TITLE_FROM_WORDS].rsplit(" ", 1)[0] or words[:TITLE_FROM_WORDS]
    return f"{cut}…"


def session_title(session: CoachingSession) -> str:
    """The coachee's own title, else one made from the first words (annotated by
    selectors.session_overview, or read here)."""
    if session.title:
        return session.title
    first = getattr(session, "first_words", None)
    if first is None:
        first = (
            Message.objects.filter(session=session, role=Role.USER)
            .order_by("seq")
            .values_list("text", flat=True)
            .first()
        )
    return title_from_words(first)


def session_title_set(*, session_id: int, user_id: int, title: str) -> CoachingSession:
    """Rename one of the coachee's sessions; an empty title goes back to the first words."""
    session = CoachingSession.objects.filter(pk=session_id, coachee_id=user_id).first()
    if session is None:
        raise PermissionDenied("not your session")
    session.title = " ".join(title.split())[:TITLE_CHARS]
    session.save(update_fields=["title"])
    return session


@dataclass
class SearchHit:
    session: CoachingSession
    title: str
    who: str
    snippet: str
    message_seq: int | None  # None: the title matched


def snippet(text: str, query: str) -> str:
    """The words around the first match, on one line."""
    flat = " ".join(text.split())
    at = flat.lower().find(query.lower())
    if at < 0 or len(flat) <= SNIPPET_CHARS:
        return flat[:SNIPPET_CHARS] + ("…" if len(flat) > SNIPPET_CHARS else "")
    start = max(0, at - SNIPPET_CHARS // 3)
    end = min(len(flat), start + SNIPPET_CHARS)
    return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")


def session_search(*, user_id: int, query: str) -> list[SearchHit]:
    """The coachee's own sessions whose title or messages contain the words, newest first.
    Only their sessions are searched (the query is scoped by coachee before anything else)."""
    return transcript_search(sessions=selectors.session_overview(user_id=user_id), query=query, you=True)


def transcript_search(*, sessions: QuerySet[CoachingSession], query: str, you: bool = False) -> list[SearchHit]:
    """Of `sessions` (already narrowed to what the reader may see: a coachee's own, a coach's
    assigned coachees'), those whose title or messages contain the words, newest first.
    `you`: the reader is the coachee, so their own messages are "You"."""
    query = " ".join(query.split())
    if len(query) < MIN_QUERY_CHARS:
        return []
    by_id = {s.pk: s for s in sessions.select_related("coachee")}
    hits = [
        SearchHit(s, session_title(s), "", s.title, None)
        for s in sessions.filter(title__icontains=query).select_related("coachee")
    ]
    messages = (
        Message.objects.filter(session__in=sessions, text__icontains=query, role__in=list(ROLE_WORDS))
        .order_by("-session__created_at", "seq")
        .only("session_id", "seq", "role", "text")[:SEARCH_RESULTS]
    )
    for message in messages:
        session = by_id[message.session_id]
        who = ROLE_WORDS[Role(message.role)]
        if message.role == Role.USER and not you:
            who = session.coachee.get_username()
        hits.append(SearchHit(session, session_title(session), who, snippet(message.text, query), message.seq))
    return hits
