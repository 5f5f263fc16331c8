"""The coachee's memory page: what the system remembers, in plain sentences with the message
each item came from, and deleting an item for real.

Apart from the turns package (the turn's hot path): nothing here runs during a turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from agents import selectors
from agents.memory import blackboard, edits
from agents.models import (
    BlackboardVersion,
    Prediction,
    Turn,
)

# Shadow's pattern classes as the coachee reads them (the enum is for the agents).
PATTERN_SENTENCES = {
    "avoidance": "You tend to steer around what feels uncomfortable.",
    "overcommitment": "You tend to take on more than there is time for.",
    "perfectionism": "You tend to wait until something can be perfect.",
    "procrastination": "You tend to put things off until later.",
    "people_pleasing": "You tend to put what others want ahead of what you want.",
    "all_or_nothing": "You tend to go all in, or not at all.",
    "steady_progress": "You are making steady progress.",
}
# Below this, a pattern is a guess the coachee would rightly not recognise: not shown.
MIN_PATTERN_CONFIDENCE_PCT = 30
SECTIONS = [
    ("stated_goals", "Goals you named"),
    ("revealed_priorities", "What your actions suggest matters to you"),
    ("predictions", "What you planned to do"),
    ("patterns", "Patterns the coach noticed"),
]


@dataclass
class Source:
    session_id: int
    turn_number: int
    message_seq: int
    session_started: Any


@dataclass
class MemoryItem:
    id: str
    kind: str
    text: str
    raw: str
    editable: bool
    hidden: bool
    corrected: bool
    when: str
    source: Source | None


def sentence(kind: str, item: dict[str, Any]) -> str | None:
    """One item in the coachee's words; None when it says nothing a person could use."""
    if kind == "patterns":
        if int(item.get("confidence_pct") or 0) < MIN_PATTERN_CONFIDENCE_PCT:
            return None
        return PATTERN_SENTENCES.get(str(item.get("pattern_class")))
    if kind == "predictions":
        commitment = str(item.get("commitment", "")).strip().rstrip(".")
        days = int(item.get("horizon_days") or 0)
        within = "a day" if days == 1 else f"{days} days"
        chance = item.get("probability_pct")
        return f"{commitment[:1].upper()}{commitment[1:]}, within {within} (the coach expected a {chance} % chance)."
    text = str(item.get("text", "")).strip()
    return f"{text[:1].upper()}{text[1:]}" if text else None


def memory_sections(*, coachee_id: int) -> list[tuple[str, list[MemoryItem]]]:
    """Each kind with its items, newest first; every text a clean sentence, every source the
    coachee message it came from (session, turn number in that session, message seq)."""
    shown = blackboard.items_for_coachee(selectors.blackboard_of(coachee_id=coachee_id))
    data = selectors.blackboard_of(coachee_id=coachee_id) or {}
    by_id = {item["id"]: (kind, item) for kind in blackboard.empty() for item in data.get(kind, [])}
    turn_ids = {by_id[i["id"]][1].get("source_turn") for i in shown if i["id"] in by_id}
    sources = {
        t.pk: Source(t.session_id, t.number, t.user_message.seq, t.session.created_at)
        for t in Turn.objects.filter(pk__in=[t for t in turn_ids if t], session__coachee_id=coachee_id)
        .select_related("user_message", "session")
        .annotate(number=selectors.turn_number())
    }
    sections: dict[str, list[MemoryItem]] = {kind: [] for kind, _ in SECTIONS}
    for entry in shown:
        kind, item = by_id.get(entry["id"], (entry["kind"], {}))
        text = sentence(kind, item)
        if text is None:
            continue
        sections[kind].append(
            MemoryItem(
                id=entry["id"],
                kind=kind,
                text=text,
                raw=entry["raw"],
                editable=entry["editable"],
                hidden=entry["hidden"],
                corrected=entry["corrected"],
                when=entry["when"],
                source=sources.get(item.get("source_turn")),
            )
        )
    return [(label, sections[kind]) for kind, label in SECTIONS if sections[kind]]


def blackboard_item_delete(*, coachee_id: int, item_id: str) -> None:
    """Delete one remembered item for real: from every version of the blackboard (so no
    history page and no revert brings it back) and, for a plan, its prediction ledger row.
    A new version records that the coachee changed their memory. KeyError: no such item."""
    with transaction.atomic():
        latest = edits.blackboard_lock_latest(coachee_id=coachee_id)
        found = blackboard.find_item(latest.data if latest else None, item_id)
        if latest is None or found is None:
            raise KeyError(item_id)
        kind, item = found
        for version in BlackboardVersion.objects.filter(coachee_id=coachee_id).select_for_update():
            if blackboard.find_item(version.data, item_id) is not None:
                version.data = blackboard.without_item(version.data, item_id)
                version.save(update_fields=["data"])
        if kind == "predictions" and item.get("source_turn"):
            Prediction.objects.filter(coachee_id=coachee_id, turn_id=item["source_turn"]).delete()
        latest.refresh_from_db()
        BlackboardVersion.objects.create(
            coachee_id=coachee_id, version=latest.version + 1, data=latest.data, edited_by_id=coachee_id
        )


def blackboard_item_edit(*, coachee_id: int, item_id: str, text: str | None = None, hidden: bool | None = None) -> None:
    """The coachee corrects or hides something the system remembers: a new version, by them."""
    with transaction.atomic():
        latest = blackboard_lock_latest(coachee_id=coachee_id)
        if latest is None:
            raise KeyError(item_id)
        data = blackboard.edit_item(latest.data, item_id, text=text, hidden=hidden)
        BlackboardVersion.objects.create(
            coachee_id=coachee_id, version=latest.version + 1, data=data, edited_by_id=coachee_id
        )


def blackboard_lock_latest(*, coachee_id: int) -> BlackboardVersion | None:
    """Lock a coachee's blackboard for a write (inside a transaction) and return its latest version.

    The lock is on the coachee's user row, not the latest version: two writers waiting on
    the version row would both read the same version number, and one write would be lost.
    """
    get_user_model().objects.select_for_update().filter(pk=coachee_id).values_list("pk", flat=True).first()
    return selectors.latest_blackboard(coachee_id=coachee_id)
