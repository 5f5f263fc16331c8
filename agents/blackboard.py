"""The coachee's shared memory: how Shadow's findings merge into it, and how it is shown to agents.

The data is plain JSON in BlackboardVersion.data. Merge rules: stated goals and revealed
priorities accumulate (counted, with first and last dates); a new follow-through prediction
supersedes the open one but keeps it; pattern classes keep their history. Lists are capped
and texts length-limited, so the blackboard cannot grow without bound.
"""

from typing import Any

from agents.schemas import EvidencedItem, ShadowOutput

MAX_ITEMS = 30  # per list; oldest fall off first
MAX_TEXT = 200  # characters per entry, as in the agents' schemas


def empty() -> dict[str, Any]:
    return {"stated_goals": [], "revealed_priorities": [], "predictions": [], "patterns": []}


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _accumulate(
    items: list[dict[str, Any]], found: list[EvidencedItem], *, turn_id: int, at: str
) -> list[dict[str, Any]]:
    by_key = {_norm(item["text"]): item for item in items}
    for entry in found:
        key = _norm(entry.text)
        if key in by_key:
            item = by_key[key]
            item["count"] += 1
            item["last_seen"] = at
            item["evidence"] = sorted(set(item["evidence"]) | set(entry.evidence))[-10:]
        else:
            item = {
                "text": entry.text[:MAX_TEXT],
                "count": 1,
                "first_seen": at,
                "last_seen": at,
                "evidence": list(entry.evidence),
                "source_turn": turn_id,
                "hidden": False,
            }
            items.append(item)
            by_key[key] = item
    return items[-MAX_ITEMS:]


def merge_shadow(data: dict[str, Any], shadow: ShadowOutput, *, turn_id: int, at: str) -> dict[str, Any]:
    """A new blackboard with Shadow's findings of one turn merged in (the input is untouched)."""
    merged = {key: [dict(item) for item in data.get(key, [])] for key in empty()}
    merged["stated_goals"] = _accumulate(merged["stated_goals"], shadow.stated_goals, turn_id=turn_id, at=at)
    merged["revealed_priorities"] = _accumulate(
        merged["revealed_priorities"], shadow.revealed_priorities, turn_id=turn_id, at=at
    )
    for prediction in merged["predictions"]:
        if prediction["status"] == "open":
            prediction["status"] = "superseded"
    merged["predictions"].append(
        {
            **shadow.follow_through.model_dump(),
            "made_at": at,
            "source_turn": turn_id,
            "status": "open",
            "hidden": False,
        }
    )
    merged["predictions"] = merged["predictions"][-MAX_ITEMS:]
    merged["patterns"].append(
        {
            "pattern_class": shadow.pattern_class,
            "confidence_pct": shadow.pattern_confidence_pct,
            "at": at,
            "source_turn": turn_id,
        }
    )
    merged["patterns"] = merged["patterns"][-MAX_ITEMS:]
    return merged


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
    patterns = data.get("patterns", [])
    if patterns:
        recent = ", ".join(f"{p['pattern_class']} ({p['confidence_pct']}%)" for p in patterns[-3:])
        lines.append(f"Recent patterns: {recent}")
    return "\n".join(lines) if lines else "(nothing yet)"
