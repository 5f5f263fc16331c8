"""Sessions: start and end (by the coachee, or when idle), the coachee's language, titles (named
after the first words unless the coachee renamed it), and search across their own conversations."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Max, QuerySet
from django.utils import timezone
from django.utils.translation.trans_real import parse_accept_lang_header

from agents import selectors
from agents.models import (
    AccountSettings,
    CoachingSession,
    Message,
    Role,
    SessionStatus,
)
from agents.turns import event_log, summaries

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


def session_for_user(*, session_id: int, user_id: int) -> CoachingSession:
    session = CoachingSession.objects.filter(pk=session_id).first()
    if session is None or session.coachee_id != user_id:
        raise PermissionDenied("not your session")
    return session


def session_start(*, user_id: int, locale: str = "en") -> CoachingSession:
    return CoachingSession.objects.create(coachee_id=user_id, locale=locale)


# The languages every safety layer speaks (patterns, classifier, replies, card, resources).
LANGUAGES = {"en": "English", "ru": "Русский", "de": "Deutsch", "pt": "Português", "fr": "Français", "es": "Español"}


UNKNOWN_LOCALE = "intl"  # no language known: English replies, the international resources


def canonical_locale(code: str) -> str:
    """'pt-br' → 'pt-BR', 'DE' → 'de'; what session locales and resources are keyed by."""
    language, _, region = code.strip().replace("_", "-").partition("-")
    return f"{language.lower()}-{region.upper()}" if region else language.lower()


def preferred_locale(*, user_id: int, accept_language: str = "") -> str:
    """The coachee's locale: their account setting, else the first language of the browser's
    Accept-Language the product speaks, else the first one it names (its resources fall back
    to the international ones), else UNKNOWN_LOCALE."""
    chosen = AccountSettings.objects.filter(user_id=user_id).values_list("locale", flat=True).first()
    if chosen:
        return chosen
    named = [canonical_locale(code) for code, _ in parse_accept_lang_header(accept_language[:500]) if code != "*"]
    for code in named:
        if code.split("-")[0] in LANGUAGES:
            return code
    return named[0][:16] if named else UNKNOWN_LOCALE


def account_locale_set(*, user_id: int, locale: str) -> None:
    """The coachee's chosen language ('' = the browser's); sessions started later use it."""
    if locale and locale not in LANGUAGES:
        raise ValueError(f"unsupported locale {locale!r}")
    AccountSettings.objects.update_or_create(user_id=user_id, defaults={"locale": locale})


def session_end(*, session_id: int, user_id: int) -> bool:
    """The coachee ends a session: it takes no more messages; open tabs are told."""
    with transaction.atomic():
        session = CoachingSession.objects.select_for_update().filter(pk=session_id, coachee_id=user_id).first()
        if session is None:
            raise PermissionDenied("not your session")
        if session.status == SessionStatus.ENDED:
            return False
        session.status = SessionStatus.ENDED
        session.ended_at = timezone.now()
        session.save(update_fields=["status", "ended_at"])
        event_log.event_emit(session_id=session.pk, type="session.ended", payload={})
        summaries.session_summary_schedule(session_id=session.pk)
    return True


def idle_sessions_end(*, idle_minutes: int, limit: int = 100) -> list[int]:
    """End open sessions nobody has written in for `idle_minutes`; their summaries are queued."""
    cutoff = timezone.now() - timedelta(minutes=idle_minutes)
    ids = list(
        CoachingSession.objects.filter(status=SessionStatus.OPEN)
        .annotate(last_message_at=Max("messages__created_at"))
        .filter(last_message_at__lt=cutoff)
        .values_list("pk", flat=True)[:limit]
    )
    return [pk for pk in ids if session_end_idle(session_id=pk, cutoff=cutoff)]


def session_end_idle(*, session_id: int, cutoff: Any) -> bool:
    """End a session nobody wrote in since `cutoff` (Celery beat); its summary is queued."""
    with transaction.atomic():
        session = CoachingSession.objects.select_for_update().filter(pk=session_id, status=SessionStatus.OPEN).first()
        if session is None or Message.objects.filter(session=session, created_at__gte=cutoff).exists():
            return False  # ended meanwhile, or the coachee came back
        session.status = SessionStatus.ENDED
        session.ended_at = timezone.now()
        session.save(update_fields=["status", "ended_at"])
        event_log.event_emit(session_id=session.pk, type="session.ended", payload={})
        summaries.session_summary_schedule(session_id=session.pk)
    return True
