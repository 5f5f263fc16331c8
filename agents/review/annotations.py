"""Writes coaches make while reviewing: annotations and blackboard reverts.

Callers (the coach admin) check who may do what first; these functions only keep the data
consistent.
"""

from __future__ import annotations

import functools
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from agents.memory import edits
from agents.models import Annotation, BlackboardVersion, CoachInboxMark, Turn
from agents.observability import metrics
from agents.pipeline import reply_gate


class NothingToAnnotateError(ValueError):
    """An annotation needs a rating, a flag or a note."""


class AlreadyLatestError(ValueError):
    """Reverting to the latest version would change nothing."""


class DismissalRefusedError(ValueError):
    """An alarm is found false with a reason, once, and only on a turn that raised one: the
    crisis pre-gate's card, or a refer or crisis escalation from the turn's agents."""


def annotation_add(
    *, turn_id: int, author_id: int, rating: int | None = None, flagged: bool = False, note: str = ""
) -> Annotation:
    """A coach's rating of the full answer, flag and/or note on one turn."""
    note = note.strip()
    if rating is None and not flagged and not note:
        raise NothingToAnnotateError("Give a rating, flag the turn or write a note.")
    if rating is not None and not 1 <= rating <= 5:
        raise ValueError("A rating is 1 to 5.")
    turn = Turn.objects.only("pk").get(pk=turn_id)
    return Annotation.objects.create(turn=turn, author_id=author_id, rating=rating, flagged=flagged, note=note)


def turns_flag(*, turn_ids: list[int], author_id: int, note: str = "") -> int:
    """Flag turns for review (one flagged annotation each, skipping turns this author already
    flagged); the number newly flagged."""
    already = set(
        Annotation.objects.filter(turn_id__in=turn_ids, author_id=author_id, flagged=True).values_list(
            "turn_id", flat=True
        )
    )
    new = [Annotation(turn_id=turn_id, author_id=author_id, flagged=True, note=note) for turn_id in turn_ids]
    created = Annotation.objects.bulk_create([a for a in new if a.turn_id not in already])
    return len(created)


def alarm_name(turn: Turn) -> str:
    """The turn's alarm that holds the coachee's later replies, as a coach names it: the
    pre-gate's crisis card, else a refer or crisis escalation its agents raised (Stability's
    risk, through arbitration); "" when it raised none."""
    if turn.crisis_signal:
        return "crisis card"
    return "escalation" if turn.escalation in reply_gate.HOLDING_ESCALATIONS else ""


def alarm_dismiss(*, turn_id: int, author_id: int, note: str) -> Turn:
    """A coach who read the turn finds its alarm false (the why is required): the crisis card the
    pre-gate gave, or the refer or crisis escalation its agents raised. The card, the signal and
    the escalation stay on the turn; only the hold on the coachee's later replies
    (reply_gate.risks_known) ends, and the false alarm is counted by the layer that raised it."""
    note = note.strip()
    if not note:
        raise DismissalRefusedError("Say why the alarm was false.")
    with transaction.atomic():
        turn = Turn.objects.select_for_update().get(pk=turn_id)
        if not alarm_name(turn):
            raise DismissalRefusedError(
                f"Turn {turn_id} raised no alarm: no crisis card, no refer or crisis escalation."
            )
        if turn.crisis_dismissed_at is not None:
            raise DismissalRefusedError(f"Turn {turn_id}'s {alarm_name(turn)} was already found a false alarm.")
        turn.crisis_dismissed_at = timezone.now()
        turn.crisis_dismissed_by_id = author_id
        turn.crisis_dismissal_note = note
        turn.save(update_fields=["crisis_dismissed_at", "crisis_dismissed_by", "crisis_dismissal_note"])
        signal = turn.crisis_signal or {"layer": metrics.AGENTS_LAYER}
        transaction.on_commit(
            functools.partial(
                metrics.crisis_dismissed, layer=str(signal.get("layer", "")), category=str(signal.get("category", ""))
            )
        )
    return turn


def blackboard_revert(*, coachee_id: int, version_id: int, by_user_id: int) -> BlackboardVersion:
    """Write a NEW latest version whose data equals the chosen older one; nothing is deleted.

    Locks the coachee's blackboard the way every writer does (memory.edits.blackboard_lock_latest),
    so a revert and a concurrent Shadow write cannot both take the same version number.
    BlackboardVersion.DoesNotExist when the version is not this coachee's.
    """
    with transaction.atomic():
        latest = edits.blackboard_lock_latest(coachee_id=coachee_id)
        target = BlackboardVersion.objects.get(pk=version_id, coachee_id=coachee_id)
        if latest is None:  # cannot happen once the target exists; keeps the types honest
            raise BlackboardVersion.DoesNotExist
        if latest.pk == target.pk:
            raise AlreadyLatestError(f"v{target.version} is already the latest version.")
        return BlackboardVersion.objects.create(
            coachee_id=coachee_id,
            version=latest.version + 1,
            data=target.data,
            edited_by_id=by_user_id,
        )


def inbox_mark_seen(*, coach_id: int, seen_at: datetime | None = None) -> CoachInboxMark:
    """Everything up to now (or `seen_at`: when the page was drawn, so nothing that arrived while
    the coach read it is skipped) counts as seen by this coach."""
    mark, _ = CoachInboxMark.objects.update_or_create(
        coach_id=coach_id, defaults={"seen_at": seen_at or timezone.now()}
    )
    return mark
