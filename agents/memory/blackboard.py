"""The coachee's shared memory: how Shadow's findings merge into it, and how it is shown to agents.

The data is plain JSON in BlackboardVersion.data. Merge rules: stated goals and revealed
priorities accumulate (counted, with first and last dates); a new follow-through prediction
supersedes the open one but keeps it; pattern classes keep their history. Lists are capped
and texts length-limited, so the blackboard cannot grow without bound.
"""

import uuid
from typing import Any

from agents.roles.schemas import EvidencedItem, ShadowOutput
from agents.safety import quality

MAX_ITEMS = 30  # per list; oldest fall off first
MAX_TEXT = 200  # characters per entry, as in the agents' schemas


def empty() -> dict[str, Any]:
    return {"stated_goals": [], "revealed_priorities": [], "predictions": [], "patterns": []}


# The lists a coachee sees on their memory page, with a label each.
ITEM_KINDS = {
    "stated_goals": "Goal you named",
    "revealed_priorities": "What your actions suggest matters",
    "predictions": "Prediction",
    "patterns": "Pattern",
}


def _new_id() -> str:
    return uuid.uuid4().hex[:12]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _provenance(turn_id: int, agent: str, prompt_version: int | None) -> dict[str, Any]:
    # Every entry says which turn, agent and prompt version wrote it, so a coach can trace
    # (and the ledger can score) what each prompt version produced.
    return {"source_turn": turn_id, "source_agent": agent, "prompt_version": prompt_version}


def _accumulate(
    items: list[dict[str, Any]], found: list[EvidencedItem], *, provenance: dict[str, Any], at: str
) -> list[dict[str, Any]]:
    by_key = {_norm(item["text"]): item for item in items}
    for entry in found:
        if not _norm(entry.text):
            continue
        key = _norm(entry.text)
        if key in by_key:
            item = by_key[key]
            item["count"] += 1
            item["last_seen"] = at
            item["evidence"] = sorted(set(item["evidence"]) | set(entry.evidence))[-10:]
        else:
            item = {
                "id": _new_id(),
                "text": entry.text[:MAX_TEXT],
                "count": 1,
                "first_seen": at,
                "last_seen": at,
                "evidence": list(entry.evidence),
                **provenance,
                "hidden": False,
            }
            items.append(item)
            by_key[key] = item
    return items[-MAX_ITEMS:]


def merge_shadow(
    data: dict[str, Any],
    shadow: ShadowOutput,
    *,
    turn_id: int,
    at: str,
    agent: str = "shadow",
    prompt_version: int | None = None,
) -> dict[str, Any]:
    """A new blackboard with Shadow's findings of one turn merged in (the input is untouched).
    A finding whose text is empty is not remembered (the quality gate empties refused ones), nor
    an "unclear" pattern, which tells the coachee and the agents nothing."""
    provenance = _provenance(turn_id, agent, prompt_version)
    merged = {key: [dict(item) for item in data.get(key, [])] for key in empty()}
    merged["stated_goals"] = _accumulate(merged["stated_goals"], shadow.stated_goals, provenance=provenance, at=at)
    merged["revealed_priorities"] = _accumulate(
        merged["revealed_priorities"], shadow.revealed_priorities, provenance=provenance, at=at
    )
    if _norm(shadow.follow_through.commitment):
        for prediction in merged["predictions"]:
            if prediction["status"] == "open":
                prediction["status"] = "superseded"
        merged["predictions"].append(
            {
                **shadow.follow_through.model_dump(),
                "id": _new_id(),
                "made_at": at,
                **provenance,
                "status": "open",
                "hidden": False,
            }
        )
        merged["predictions"] = merged["predictions"][-MAX_ITEMS:]
    if shadow.pattern_class != "unclear":
        merged["patterns"].append(
            {
                "id": _new_id(),
                "pattern_class": shadow.pattern_class,
                "confidence_pct": shadow.pattern_confidence_pct,
                "at": at,
                **provenance,
                "hidden": False,
            }
        )
        merged["patterns"] = merged["patterns"][-MAX_ITEMS:]
    validate(merged)
    return merged


# What each kind of entry must hold (field -> type); anything else is refused on write, so
# a malformed or oversized entry can never reach a prompt.
_REQUIRED: dict[str, dict[str, type | tuple[type, ...]]] = {
    "stated_goals": {"id": str, "text": str, "count": int, "first_seen": str, "last_seen": str, "evidence": list},
    "revealed_priorities": {"id": str, "text": str, "count": int, "last_seen": str, "evidence": list},
    "predictions": {"id": str, "commitment": str, "probability_pct": int, "horizon_days": int, "status": str},
    "patterns": {"id": str, "pattern_class": str, "confidence_pct": int, "at": str},
}


def validate(data: dict[str, Any]) -> None:
    """Raise ValueError unless `data` is a well-formed, bounded blackboard."""
    unknown = set(data) - set(empty())
    if unknown:
        raise ValueError(f"unknown blackboard lists: {sorted(unknown)}")
    for kind, fields in _REQUIRED.items():
        items = data.get(kind, [])
        if not isinstance(items, list) or len(items) > MAX_ITEMS:
            raise ValueError(f"{kind}: not a list of at most {MAX_ITEMS} entries")
        for item in items:
            for name, kind_type in fields.items():
                if not isinstance(item.get(name), kind_type):
                    raise ValueError(f"{kind}: entry without a valid {name}")
            for name in ("text", "commitment", "rationale", "original_text"):
                if len(str(item.get(name, ""))) > MAX_TEXT:
                    raise ValueError(f"{kind}: {name} longer than {MAX_TEXT} characters")


def render(data: dict[str, Any] | None) -> str:
    """The blackboard as data lines for a prompt; hidden items never reach an agent."""
    if not data:
        return "(nothing yet)"
    lines: list[str] = []
    goals = [g for g in data.get("stated_goals", []) if not g.get("hidden")]
    if goals:
        lines.append("Stated goals:")
        lines += [f"- {g['text']} (mentioned {g['count']}x, last {g['last_seen'][:10]})" for g in goals]
    priorities = [p for p in data.get("revealed_priorities", []) if not p.get("hidden")]
    if priorities:
        lines.append("Revealed priorities:")
        lines += [f"- {p['text']} (seen {p['count']}x)" for p in priorities]
    open_predictions = [p for p in data.get("predictions", []) if p["status"] == "open" and not p.get("hidden")]
    if open_predictions:
        p = open_predictions[-1]
        lines.append(f"Open prediction: {p['commitment']} - {p['probability_pct']}% within {p['horizon_days']} days")
    patterns = [p for p in data.get("patterns", []) if not p.get("hidden")]
    if patterns:
        recent = ", ".join(f"{p['pattern_class']} ({p['confidence_pct']}%)" for p in patterns[-3:])
        lines.append(f"Recent patterns: {recent}")
    return "\n".join(lines) if lines else "(nothing yet)"


def item_text(kind: str, item: dict[str, Any]) -> str:
    if kind == "predictions":
        return f"{item['commitment']} ({item['probability_pct']}% within {item['horizon_days']} days)"
    if kind == "patterns":
        return f"{item['pattern_class'].replace('_', ' ')} ({item['confidence_pct']}% confident)"
    return str(item["text"])


def items_for_coachee(data: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every item with what it says, where it came from and when, newest first."""
    items: list[dict[str, Any]] = []
    for kind, label in ITEM_KINDS.items():
        for item in (data or {}).get(kind, []):
            if kind == "predictions" and item.get("status") == "superseded":
                continue
            if kind == "patterns" and item.get("pattern_class") == "unclear":
                continue  # written before unclear patterns were left out: it says nothing
            if quality.memory_findings(item_text(kind, item)):
                continue  # written before the gate refused such text (markup, prompt talk)
            items.append(
                {
                    "id": item.get("id", ""),
                    "kind": kind,
                    "label": label,
                    "text": item_text(kind, item),
                    "raw": item.get("commitment") or item.get("text", ""),
                    "editable": kind in ("stated_goals", "revealed_priorities", "predictions"),
                    "hidden": bool(item.get("hidden")),
                    "corrected": "original_text" in item,
                    "source_turn": item.get("source_turn"),
                    "when": item.get("last_seen") or item.get("made_at") or item.get("at") or "",
                }
            )
    return sorted(items, key=lambda i: i["when"], reverse=True)


def find_item(data: dict[str, Any] | None, item_id: str) -> tuple[str, dict[str, Any]] | None:
    """(kind, item) of the item with this id, or None."""
    for kind in empty():
        for item in (data or {}).get(kind, []):
            if isinstance(item, dict) and item.get("id") == item_id:
                return kind, item
    return None


def without_item(data: dict[str, Any], item_id: str) -> dict[str, Any]:
    """The blackboard with one item gone (unchanged when it holds no such item)."""
    return {key: [item for item in data.get(key, []) if item.get("id") != item_id] for key in empty()}


def edit_item(
    data: dict[str, Any], item_id: str, *, text: str | None = None, hidden: bool | None = None
) -> dict[str, Any]:
    """A new blackboard with one item corrected or (un)hidden; KeyError when there is no such item."""
    edited = {key: [dict(item) for item in data.get(key, [])] for key in empty()}
    for kind, items in edited.items():
        for item in items:
            if item.get("id") != item_id:
                continue
            if text is not None:
                field = "commitment" if kind == "predictions" else "text"
                if kind == "patterns":
                    raise ValueError("a pattern can be hidden, not rewritten")
                item.setdefault("original_text", item[field])
                item[field] = text.strip()[:MAX_TEXT]
            if hidden is not None:
                item["hidden"] = hidden
            validate(edited)
            return edited
    raise KeyError(item_id)
