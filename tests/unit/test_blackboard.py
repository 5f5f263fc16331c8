"""The blackboard's merge rules and how it is shown to agents (plain data, no database)."""

from __future__ import annotations

import copy
from typing import Any

from agents.memory import blackboard
from agents.memory.blackboard import MAX_ITEMS
from agents.roles.schemas import ShadowOutput

DAY1 = "2025-03-01T10:00:00+00:00"
DAY2 = "2025-03-02T11:00:00+00:00"
DAY3 = "2025-03-03T12:00:00+00:00"


def shadow(
    goals: list[tuple[str, list[int]]] | None = None,
    priorities: list[tuple[str, list[int]]] | None = None,
    commitment: str = "Run on Monday",
    probability: int = 40,
    pattern: str = "procrastination",
    confidence: int = 60,
) -> ShadowOutput:
    return ShadowOutput.model_validate(
        {
            "stated_goals": [{"text": t, "evidence": e} for t, e in (goals or [])],
            "revealed_priorities": [{"text": t, "evidence": e} for t, e in (priorities or [])],
            "follow_through": {
                "commitment": commitment,
                "probability_pct": probability,
                "horizon_days": 7,
                "rationale": "Has skipped before.",
            },
            "pattern_class": pattern,
            "pattern_confidence_pct": confidence,
        }
    )


def has(item: dict[str, Any], expected: dict[str, Any]) -> bool:
    """Whether `item` says at least what `expected` says (items may carry more, such as an id)."""
    return all(key in item and item[key] == value for key, value in expected.items())


def test_first_merge_into_an_empty_board() -> None:
    found = shadow(goals=[("Run twice a week", [3])], priorities=[("Work first", [4])])
    data = blackboard.merge_shadow(blackboard.empty(), found, turn_id=7, at=DAY1)
    assert set(data) == {"stated_goals", "revealed_priorities", "predictions", "patterns"}
    assert len(data["stated_goals"]) == 1
    assert has(
        data["stated_goals"][0],
        {
            "text": "Run twice a week",
            "count": 1,
            "first_seen": DAY1,
            "last_seen": DAY1,
            "evidence": [3],
            "source_turn": 7,
            "hidden": False,
        },
    ), data["stated_goals"][0]
    assert [p["text"] for p in data["revealed_priorities"]] == ["Work first"]
    assert len(data["predictions"]) == 1
    assert has(
        data["predictions"][0],
        {
            "commitment": "Run on Monday",
            "probability_pct": 40,
            "horizon_days": 7,
            "rationale": "Has skipped before.",
            "made_at": DAY1,
            "source_turn": 7,
            "status": "open",
            "hidden": False,
        },
    ), data["predictions"][0]
    assert len(data["patterns"]) == 1
    assert has(
        data["patterns"][0], {"pattern_class": "procrastination", "confidence_pct": 60, "at": DAY1, "source_turn": 7}
    ), data["patterns"][0]


def test_the_helper_notices_a_difference() -> None:
    assert not has({"text": "a", "count": 1}, {"text": "a", "count": 2})
    assert not has({"text": "a"}, {"text": "a", "count": 1})
    assert has({"text": "a", "count": 1, "id": "x"}, {"text": "a", "count": 1})


def test_goals_accumulate_with_counts_ignoring_case_and_spacing() -> None:
    data = blackboard.merge_shadow(blackboard.empty(), shadow(goals=[("Run twice a week", [3, 1])]), turn_id=1, at=DAY1)
    data = blackboard.merge_shadow(data, shadow(goals=[("  run   TWICE a week ", [5])]), turn_id=2, at=DAY2)
    data = blackboard.merge_shadow(data, shadow(goals=[("Sleep by eleven", [8])]), turn_id=3, at=DAY3)
    goals = data["stated_goals"]
    assert [g["text"] for g in goals] == ["Run twice a week", "Sleep by eleven"]
    run = goals[0]
    assert run["count"] == 2
    assert run["first_seen"] == DAY1
    assert run["last_seen"] == DAY2
    assert run["evidence"] == [1, 3, 5]
    assert run["source_turn"] == 1  # where it was first found
    assert goals[1]["count"] == 1


def test_revealed_priorities_accumulate_like_goals() -> None:
    data = blackboard.merge_shadow(
        blackboard.empty(), shadow(priorities=[("Work comes first", [2])]), turn_id=1, at=DAY1
    )
    data = blackboard.merge_shadow(data, shadow(priorities=[("work comes first", [2, 6])]), turn_id=2, at=DAY2)
    assert len(data["revealed_priorities"]) == 1
    assert data["revealed_priorities"][0]["count"] == 2
    assert data["revealed_priorities"][0]["evidence"] == [2, 6]


def test_a_new_prediction_supersedes_the_open_one_and_keeps_it() -> None:
    data = blackboard.merge_shadow(blackboard.empty(), shadow(commitment="Run Monday"), turn_id=1, at=DAY1)
    data = blackboard.merge_shadow(data, shadow(commitment="Run Tuesday", probability=70), turn_id=2, at=DAY2)
    data = blackboard.merge_shadow(data, shadow(commitment="Run Friday", probability=20), turn_id=3, at=DAY3)
    assert [(p["commitment"], p["status"]) for p in data["predictions"]] == [
        ("Run Monday", "superseded"),
        ("Run Tuesday", "superseded"),
        ("Run Friday", "open"),
    ]
    assert [p["source_turn"] for p in data["predictions"]] == [1, 2, 3]


def test_patterns_are_appended_in_order() -> None:
    data = blackboard.merge_shadow(blackboard.empty(), shadow(pattern="avoidance", confidence=30), turn_id=1, at=DAY1)
    data = blackboard.merge_shadow(data, shadow(pattern="avoidance", confidence=50), turn_id=2, at=DAY2)
    data = blackboard.merge_shadow(data, shadow(pattern="steady_progress", confidence=80), turn_id=3, at=DAY3)
    assert [(p["pattern_class"], p["confidence_pct"], p["at"]) for p in data["patterns"]] == [
        ("avoidance", 30, DAY1),
        ("avoidance", 50, DAY2),
        ("steady_progress", 80, DAY3),
    ]


def test_lists_are_capped_and_the_oldest_fall_off() -> None:
    data = blackboard.empty()
    total = MAX_ITEMS + 5
    for i in range(total):
        data = blackboard.merge_shadow(
            data, shadow(goals=[(f"Goal {i}", [i])], commitment=f"Promise {i}"), turn_id=i, at=DAY1
        )
    assert len(data["stated_goals"]) == MAX_ITEMS
    assert data["stated_goals"][0]["text"] == f"Goal {total - MAX_ITEMS}"
    assert data["stated_goals"][-1]["text"] == f"Goal {total - 1}"
    assert len(data["predictions"]) == MAX_ITEMS
    assert data["predictions"][0]["commitment"] == f"Promise {total - MAX_ITEMS}"
    assert [p["status"] for p in data["predictions"]].count("open") == 1
    assert data["predictions"][-1]["status"] == "open"
    assert len(data["patterns"]) == MAX_ITEMS
    assert data["patterns"][0]["source_turn"] == total - MAX_ITEMS


def test_merge_does_not_change_its_input() -> None:
    data = blackboard.merge_shadow(blackboard.empty(), shadow(goals=[("Run", [1])]), turn_id=1, at=DAY1)
    before = copy.deepcopy(data)
    merged = blackboard.merge_shadow(data, shadow(goals=[("run", [2]), ("Read", [2])]), turn_id=2, at=DAY2)
    assert data == before
    assert data["predictions"][0]["status"] == "open"
    assert merged["stated_goals"][0]["count"] == 2
    assert merged["predictions"][0]["status"] == "superseded"


def test_merge_fills_in_missing_lists() -> None:
    # An older board without some lists still merges.
    data = blackboard.merge_shadow({"stated_goals": []}, shadow(), turn_id=1, at=DAY1)
    assert set(data) == {"stated_goals", "revealed_priorities", "predictions", "patterns"}
    assert len(data["predictions"]) == 1


# --- render --------------------------------------------------------------------------------


def test_render_of_nothing_says_so() -> None:
    assert blackboard.render(None) == "(nothing yet)"
    assert blackboard.render({}) == "(nothing yet)"
    assert blackboard.render(blackboard.empty()) == "(nothing yet)"


def test_render_shows_goals_priorities_the_open_prediction_and_recent_patterns() -> None:
    data = blackboard.merge_shadow(
        blackboard.empty(),
        shadow(goals=[("Run twice a week", [1])], priorities=[("Work first", [1])], pattern="avoidance"),
        turn_id=1,
        at=DAY1,
    )
    data = blackboard.merge_shadow(
        data,
        shadow(goals=[("run twice a week", [2])], commitment="Run Friday", probability=25, pattern="perfectionism"),
        turn_id=2,
        at=DAY2,
    )
    for pattern in ("overcommitment", "procrastination"):
        data = blackboard.merge_shadow(data, shadow(pattern=pattern, commitment="Run Friday"), turn_id=3, at=DAY3)
    assert blackboard.render(data).splitlines() == [
        "Stated goals:",
        "- Run twice a week (mentioned 2x, last 2025-03-02)",
        "Revealed priorities:",
        "- Work first (seen 1x)",
        "Open prediction: Run Friday - 40% within 7 days",
        "Recent patterns: perfectionism (60%), overcommitment (60%), procrastination (60%)",
    ]


def test_render_hides_hidden_items() -> None:
    data = blackboard.merge_shadow(
        blackboard.empty(),
        shadow(goals=[("Secret goal", [1]), ("Shown goal", [1])], priorities=[("Hidden priority", [1])]),
        turn_id=1,
        at=DAY1,
    )
    data["stated_goals"][0]["hidden"] = True
    data["revealed_priorities"][0]["hidden"] = True
    data["predictions"][0]["hidden"] = True
    text = blackboard.render(data)
    assert "Secret goal" not in text
    assert "Hidden priority" not in text
    assert "Revealed priorities" not in text
    assert "Open prediction" not in text
    assert "- Shown goal (mentioned 1x, last 2025-03-01)" in text


def test_render_of_only_hidden_items_says_nothing_yet() -> None:
    data: dict[str, Any] = blackboard.merge_shadow(
        blackboard.empty(), shadow(goals=[("Secret", [1])]), turn_id=1, at=DAY1
    )
    data["stated_goals"][0]["hidden"] = True
    data["predictions"][0]["hidden"] = True
    data["patterns"] = []
    assert blackboard.render(data) == "(nothing yet)"


def test_render_shows_no_superseded_prediction() -> None:
    data = blackboard.merge_shadow(blackboard.empty(), shadow(commitment="Old promise"), turn_id=1, at=DAY1)
    data = blackboard.merge_shadow(data, shadow(commitment="New promise"), turn_id=2, at=DAY2)
    text = blackboard.render(data)
    assert "New promise" in text
    assert "Old promise" not in text
