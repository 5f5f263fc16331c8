"""The coachee's context sources, read ahead between turns, off Coach's first token.

A turn's shared prefix is built from seven reads (history, this session's summary, earlier
sessions' summaries or excerpts, open commitments, Stability's blocked moves), all before
Coach's request. They are known before the coachee writes again, so the process holding the
coachee's socket reads them when a turn ends and when a socket opens (`read_ahead`), with the
coachee's change stamp first (models.ChangeStamp: triggers renew it on every write to what
these reads see). The next turn uses the copy only when the stamp turn_accept read is still
the copy's (`sources_for`, `latest_board`), adding its own new message; a summary written meanwhile, another
tab's message, an erasure, a coach's edit renewed the stamp, and the turn reads afresh.

Time matters to one read: a commitment leaves the pinned list a grace period after its due
date, so a copy is good only until the first one it holds would leave (and an hour at most).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict
from datetime import datetime, timedelta

from django.db import close_old_connections
from django.utils import timezone

from agents import context, selectors, stamps, tokens, turn_cache
from agents.models import BlackboardVersion, CoachingSession, Message, SessionStatus, Turn

logger = logging.getLogger(__name__)

SESSIONS_KEPT = 1024
# However quiet the stamp, a copy is read again after this long (a last line of defence
# against a writer the triggers do not see, such as a future table).
LONGEST_KEPT = timedelta(hours=1)


@dataclasses.dataclass(frozen=True)
class Copy:
    version: int  # the coachee's change stamp, read before the sources
    read_at: datetime
    good_until: datetime
    last_seq: int  # of the newest message in the copy's history
    sources: context.Sources
    board: BlackboardVersion | None  # the coachee's latest blackboard version
    session: CoachingSession  # with its coachee


_lock = threading.Lock()
_copies: OrderedDict[int, Copy] = OrderedDict()  # by session id
_asked: OrderedDict[int, object] = OrderedDict()  # session id -> what the last read_ahead was for


def read_ahead_once(*, session_id: int, reason: object) -> None:
    """read_ahead, unless it was already asked for this session and reason (one turn's end
    reaches every socket of the session in this process)."""
    with _lock:
        if _asked.get(session_id) == reason:
            return
        _asked[session_id] = reason
        _asked.move_to_end(session_id)
        while len(_asked) > SESSIONS_KEPT:
            _asked.popitem(last=False)
    try:
        read_ahead(session_id=session_id)
    except Exception:
        logger.warning("reading the context of session %s ahead failed", session_id, exc_info=True)
    finally:
        close_old_connections()  # a worker thread's connection goes back to the pool


def read_ahead(*, session_id: int) -> None:
    """Read the session's sources for its next turn, and count their parts for the caches."""
    session = CoachingSession.objects.select_related("coachee").filter(pk=session_id).first()
    if session is None or session.status != SessionStatus.OPEN:
        return
    coachee_key = stamps.coachee_key(session.coachee_id)
    found = stamps.versions([coachee_key, stamps.SETUP])  # before the sources they vouch for
    now = timezone.now()
    sources = context.read_sources(session, user_seq=None, at=now)
    board = selectors.latest_blackboard(coachee_id=session.coachee_id)
    # The pinned commitments are the newest few in force: the copy's list changes only when one
    # it holds leaves (one beyond it leaving changes nothing shown).
    good_until = min(
        [now + LONGEST_KEPT] + [p.due_at + timedelta(days=context.OVERDUE_GRACE_DAYS) for p in sources.open_predictions]
    )
    copy = Copy(
        version=found[coachee_key],
        read_at=now,
        good_until=good_until,
        last_seq=max((m.seq for m in sources.history), default=0),
        sources=sources,
        board=board,
        session=session,
    )
    with _lock:
        _copies[session_id] = copy
        _copies.move_to_end(session_id)
        # Oldest first: drop the copies past their hour too (a coachee's words are not kept in
        # memory for longer than they could be used).
        while _copies and (len(_copies) > SESSIONS_KEPT or next(iter(_copies.values())).read_at < now - LONGEST_KEPT):
            _copies.popitem(last=False)
    # The next prefix's parts, counted now: only the new message is left for the turn.
    head = context.shared_head(session, board.data if board else None, sources, today=now.date())
    counter = context.prefix_counter_of(turn_cache.setup_at(found[stamps.SETUP]))
    tokens.count_soon(counter.spec, [p for p in context.prefix_parts(head, sources) if p])


def with_message(sources: context.Sources, message: Message) -> context.Sources:
    """The copy's sources as the turn of `message` reads them."""
    history = [*sources.history, message][-context.HISTORY_FETCH_LIMIT :]
    return dataclasses.replace(sources, history=history)


def latest_board(session_id: int, version: int) -> tuple[bool, BlackboardVersion | None]:
    """(True, the coachee's latest blackboard version) from the copy when its stamp is
    `version` (turn_accept's read), else (False, None): read it."""
    with _lock:
        copy = _copies.get(session_id)
    if copy is None or copy.version != version:
        return False, None
    return True, copy.board


def sources_for(turn: Turn) -> context.Sources | None:
    """The turn's sources from the copy, when turn_accept read the copy's stamp; else None."""
    version = turn_cache.context_version_seen(turn.pk)
    with _lock:
        copy = _copies.get(turn.session_id)
    if copy is None or version is None or version != copy.version:
        return None
    message = turn.user_message
    if not (copy.read_at <= turn.started_at < copy.good_until) or message.seq <= copy.last_seq:
        return None
    return with_message(copy.sources, message)


def clear() -> None:
    """For tests: start from nothing."""
    with _lock:
        _copies.clear()
        _asked.clear()
