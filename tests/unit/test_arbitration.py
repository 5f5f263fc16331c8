"""Arbitration rules: pure code over the specialists' outputs, no database or model calls."""

from __future__ import annotations

from typing import Any

import pytest

from agents.roles.arbitration import (
    CRISIS_INSTRUCTION,
    HELPER_CRISIS_INSTRUCTION,
    SAFE_STRATEGY,
    Arbitration,
    MoveInfo,
    arbitrate,
    arbitrate_crisis,
    render_brief,
)
from agents.roles.schemas import PersonaOutput, PlasticityOutput, ShadowOutput, StabilityOutput

CATALOG: dict[str, MoveInfo] = {
    "open_question": MoveInfo("open_question", "Open question", "Ask one open question.", False),
    "tiny_next_step": MoveInfo("tiny_next_step", "Tiny next step", "One small action.", False),
    "reflect_feelings": MoveInfo("reflect_feelings", "Reflect feelings", "Name the feeling.", False),
    "direct_challenge": MoveInfo("direct_challenge", "Direct challenge", "Name the gap bluntly.", True),
    "deadline_commitment": MoveInfo("deadline_commitment", "Deadline commitment", "Ask for a deadline.", True),
}
PUSHING = sorted(key for key, move in CATALOG.items() if move.pushes)
TRAITS = ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")
PREFERENCES = {"directness": 4, "warmth": 3, "structure": 2, "challenge": 5, "pacing": 1}


def shadow() -> ShadowOutput:
    return ShadowOutput.model_validate(
        {
            "stated_goals": [{"text": "Run twice a week", "evidence": [1]}],
            "revealed_priorities": [],
            "follow_through": {
                "commitment": "Run on Monday",
                "probability_pct": 40,
                "horizon_days": 7,
                "rationale": "Has skipped before.",
            },
            "pattern_class": "procrastination",
            "pattern_confidence_pct": 60,
        }
    )


def persona() -> PersonaOutput:
    trait = {"score": 50, "uncertainty": 10, "evidence": []}
    return PersonaOutput.model_validate(
        {
            "ocean": dict.fromkeys(TRAITS, trait),
            "recurring_goals": ["Exercise"],
            "follow_through": [{"goal": "Exercise", "percent": 30}],
            "growth_edges": ["Smaller steps"],
        }
    )


def plasticity(strategy: str = "challenge", moves: list[str] | None = None) -> PlasticityOutput:
    return PlasticityOutput.model_validate(
        {
            "preferences": PREFERENCES,
            "strategy": strategy,
            "suggested_moves": moves if moves is not None else ["direct_challenge", "tiny_next_step"],
            "rationale": "They like directness.",
        }
    )


def risk(severity: int, detectability: int = 1, reversibility: int = 1, description: str = "Strain") -> dict[str, Any]:
    return {
        "description": description,
        "severity": severity,
        "detectability": detectability,
        "reversibility": reversibility,
    }


def stability(
    *, risks: list[dict[str, Any]] | None = None, blocked: list[str] | None = None, escalation: str = "none"
) -> StabilityOutput:
    return StabilityOutput.model_validate(
        {
            "risks": risks or [],
            "blocked_moves": blocked or [],
            "escalation": escalation,
            "rationale": "Watch for strain.",
        }
    )


def run(**overrides: Any) -> Arbitration:
    outputs: dict[str, Any] = {
        "shadow": shadow(),
        "persona": persona(),
        "plasticity": plasticity(),
        "stability": stability(),
    }
    outputs.update(overrides)
    return arbitrate(catalog=CATALOG, **outputs)


def rules(result: Arbitration) -> list[str]:
    return [c.rule for c in result.conflicts]


def test_without_clashes_the_plan_passes_through_unchanged() -> None:
    result = run(plasticity=plasticity("explore", ["open_question", "direct_challenge"]))
    assert result.conflicts == []
    assert result.brief == {
        "strategy": "explore",
        "allowed_moves": ["open_question", "direct_challenge"],
        "blocked_moves": [],
        "escalation": "none",
        "risks": [],
        "preferences": PREFERENCES,
        "instructions": [],
        "missing": [],
    }


def test_blocked_move_is_dropped_with_a_conflict_record() -> None:
    result = run(plasticity=plasticity("explore"), stability=stability(blocked=["direct_challenge"]))
    assert result.allowed_moves == ["tiny_next_step"]
    assert result.blocked_moves == ["direct_challenge"]
    assert result.brief["strategy"] == "explore"
    assert len(result.conflicts) == 1
    conflict = result.conflicts[0]
    assert conflict.rule == "blocked_move_dropped"
    assert (conflict.left_agent, conflict.right_agent) == ("plasticity", "stability")
    assert conflict.left_claim == {"suggested_move": "direct_challenge", "rationale": "They like directness."}
    assert conflict.right_claim == {"blocked_move": "direct_challenge", "rationale": "Watch for strain."}
    assert "direct_challenge" in conflict.resolution


def test_a_blocked_move_that_was_not_suggested_makes_no_conflict() -> None:
    result = run(plasticity=plasticity("explore", ["open_question"]), stability=stability(blocked=["tiny_next_step"]))
    assert result.conflicts == []
    assert result.allowed_moves == ["open_question"]
    assert result.blocked_moves == ["tiny_next_step"]


def test_duplicate_suggestions_are_kept_once_and_conflict_once() -> None:
    # At most three suggestions, but nothing stops the model from repeating one.
    moves = ["direct_challenge", "open_question", "direct_challenge"]
    result = run(plasticity=plasticity("explore", moves), stability=stability(blocked=["direct_challenge"]))
    assert result.allowed_moves == ["open_question"]
    assert rules(result) == ["blocked_move_dropped"]

    unblocked = run(plasticity=plasticity("explore", ["open_question", "open_question", "tiny_next_step"]))
    assert unblocked.allowed_moves == ["open_question", "tiny_next_step"]


@pytest.mark.parametrize(
    ("severity", "detectability", "reversibility", "high"),
    [
        (4, 1, 1, True),  # severity threshold, priority 4
        (3, 3, 4, True),  # priority 36 exactly
        (3, 2, 5, False),  # priority 30
        (3, 3, 3, False),  # priority 27
        (2, 5, 4, True),  # priority 40, low severity
    ],
)
def test_high_risk_thresholds(severity: int, detectability: int, reversibility: int, high: bool) -> None:
    result = run(stability=stability(risks=[risk(severity, detectability, reversibility)]))
    if high:
        assert rules(result) == ["high_risk_overrides_push"]
        assert result.brief["strategy"] == SAFE_STRATEGY
        assert result.allowed_moves == ["tiny_next_step"]
        assert result.blocked_moves == ["direct_challenge"]
    else:
        assert result.conflicts == []
        assert result.brief["strategy"] == "challenge"
        assert result.allowed_moves == ["direct_challenge", "tiny_next_step"]
        assert result.blocked_moves == []


def test_high_risk_by_severity_alone_overrides_push() -> None:
    # Severity 4 with the lowest detectability and reversibility: priority 4, still high.
    result = run(stability=stability(risks=[risk(4, 1, 1, "Burnout")]))
    assert result.brief["strategy"] == SAFE_STRATEGY
    conflict = result.conflicts[0]
    assert conflict.rule == "high_risk_overrides_push"
    assert conflict.left_claim == {"strategy": "challenge"}
    assert conflict.right_claim == {"high_risks": [risk(4, 1, 1, "Burnout") | {"priority": 4}]}
    assert "challenge" in conflict.resolution
    assert SAFE_STRATEGY in conflict.resolution


def test_high_risk_by_priority_alone_overrides_push() -> None:
    # Severity 3 is below the severity threshold, but 3 * 3 * 4 = 36 reaches the priority one.
    result = run(stability=stability(risks=[risk(3, 3, 4, "Sleep loss"), risk(1, 1, 1, "Minor")]))
    assert result.brief["strategy"] == SAFE_STRATEGY
    assert rules(result) == ["high_risk_overrides_push"]
    # Only the high risk is cited; the brief lists every risk with its priority.
    assert result.conflicts[0].right_claim == {"high_risks": [risk(3, 3, 4, "Sleep loss") | {"priority": 36}]}
    assert [r["priority"] for r in result.brief["risks"]] == [36, 1]


def test_high_risk_withholds_pushing_moves_even_with_a_gentle_strategy() -> None:
    result = run(
        plasticity=plasticity("explore", ["deadline_commitment", "open_question"]),
        stability=stability(risks=[risk(5)]),
    )
    assert result.brief["strategy"] == "explore"  # not pushing: no override
    assert result.allowed_moves == ["open_question"]
    assert result.blocked_moves == ["deadline_commitment"]
    assert result.conflicts == []


def test_escalation_refer_points_to_professional_help() -> None:
    result = run(stability=stability(escalation="refer"))
    assert result.brief["escalation"] == "refer"
    assert result.brief["strategy"] == SAFE_STRATEGY
    assert result.allowed_moves == ["direct_challenge", "tiny_next_step"]  # refer keeps the moves
    assert len(result.brief["instructions"]) == 1
    assert "qualified professional" in result.brief["instructions"][0]
    assert rules(result) == ["escalation_changes_brief"]
    conflict = result.conflicts[0]
    assert conflict.left_claim == {"strategy": "challenge"}
    assert conflict.right_claim == {"escalation": "refer"}


def test_escalation_crisis_empties_the_moves_and_asks_for_crisis_resources() -> None:
    result = run(plasticity=plasticity("explore", ["open_question"]), stability=stability(escalation="crisis"))
    assert result.brief["escalation"] == "crisis"
    assert result.brief["strategy"] == SAFE_STRATEGY
    assert result.allowed_moves == []
    assert any("crisis resources" in line for line in result.brief["instructions"])
    assert rules(result) == ["escalation_changes_brief"]
    assert result.conflicts[0].right_claim == {"escalation": "crisis"}


@pytest.mark.parametrize(
    ("someone_else", "instruction"), [(False, CRISIS_INSTRUCTION), (True, HELPER_CRISIS_INSTRUCTION)]
)
def test_the_pre_gates_crisis_brief_speaks_to_whoever_is_at_risk_or_worried(
    someone_else: bool, instruction: str
) -> None:
    result = arbitrate_crisis(run(plasticity=plasticity("explore", ["open_question"])), someone_else=someone_else)
    assert result.brief["escalation"] == "crisis"
    assert result.brief["strategy"] == SAFE_STRATEGY
    assert result.allowed_moves == []
    assert result.brief["instructions"][-1] == instruction
    other = HELPER_CRISIS_INSTRUCTION if instruction == CRISIS_INSTRUCTION else CRISIS_INSTRUCTION
    assert other not in result.brief["instructions"]


def test_escalation_with_an_already_safe_strategy_records_no_conflict() -> None:
    result = run(plasticity=plasticity(SAFE_STRATEGY, ["open_question"]), stability=stability(escalation="refer"))
    assert result.conflicts == []
    assert result.brief["strategy"] == SAFE_STRATEGY
    assert len(result.brief["instructions"]) == 1


@pytest.mark.parametrize("level", ["none", "monitor"])
def test_low_escalation_leaves_the_brief_alone(level: str) -> None:
    result = run(stability=stability(escalation=level))
    assert result.brief["escalation"] == level
    assert result.brief["strategy"] == "challenge"
    assert result.brief["instructions"] == []
    assert result.conflicts == []


def test_stability_missing_gives_a_conservative_brief() -> None:
    result = run(stability=None, plasticity=plasticity("challenge", ["direct_challenge", "open_question"]))
    assert result.brief["strategy"] == SAFE_STRATEGY
    assert result.allowed_moves == ["open_question"]
    # Every pushing move of the catalog is blocked, suggested or not.
    assert result.blocked_moves == PUSHING
    assert result.brief["missing"] == ["stability"]
    assert result.brief["escalation"] == "none"
    assert any("safety review is missing" in line for line in result.brief["instructions"])
    assert rules(result) == ["stability_missing_conservative"]
    conflict = result.conflicts[0]
    assert conflict.left_claim == {"suggested_moves": ["direct_challenge"]}
    assert conflict.right_claim == {"status": "failed"}


def test_stability_missing_without_pushing_suggestions_records_no_conflict() -> None:
    result = run(stability=None, plasticity=plasticity("explore", ["open_question"]))
    assert result.conflicts == []
    assert result.allowed_moves == ["open_question"]
    assert result.blocked_moves == PUSHING
    assert result.brief["strategy"] == SAFE_STRATEGY


def test_everything_missing_is_listed_and_safe() -> None:
    result = arbitrate(shadow=None, persona=None, plasticity=None, stability=None, catalog=CATALOG)
    assert result.brief["missing"] == ["shadow", "persona", "plasticity", "stability"]
    assert result.brief["strategy"] == SAFE_STRATEGY
    assert result.allowed_moves == []
    assert result.brief["preferences"] is None
    assert result.conflicts == []


def test_rules_combine_in_order() -> None:
    result = run(
        plasticity=plasticity("accountability", ["direct_challenge", "deadline_commitment", "tiny_next_step"]),
        stability=stability(risks=[risk(5, 5, 5)], blocked=["direct_challenge"], escalation="refer"),
    )
    assert rules(result) == ["blocked_move_dropped", "high_risk_overrides_push", "escalation_changes_brief"]
    assert result.allowed_moves == ["tiny_next_step"]
    assert result.blocked_moves == ["deadline_commitment", "direct_challenge"]
    # The escalation conflict reports the strategy as it stood after the risk override.
    assert result.conflicts[2].left_claim == {"strategy": SAFE_STRATEGY}


def test_render_brief_names_moves_and_lists_everything() -> None:
    result = run(
        plasticity=plasticity("challenge", ["direct_challenge", "open_question", "not_in_catalog"]),
        stability=stability(risks=[risk(4, 2, 3, "Exhaustion")], blocked=["tiny_next_step"], escalation="refer"),
        shadow=None,
    )
    text = render_brief(result.brief, CATALOG)
    lines = text.splitlines()
    assert lines[0] == "Strategy: support"
    assert lines[1] == "Allowed moves: open_question (Open question), not_in_catalog"
    assert lines[2] == "Blocked moves (never use): direct_challenge (Direct challenge), tiny_next_step (Tiny next step)"
    assert lines[3] == "Escalation: refer"
    assert lines[4] == "Speak with: directness 4/5, warmth 3/5, structure 2/5, challenge 5/5, pacing 1/5"
    assert lines[5] == "Risks: Exhaustion (priority 24)"
    assert lines[6] == "Missing signals: shadow"
    assert "qualified professional" in lines[7]
    assert len(lines) == 8


def test_render_brief_of_an_empty_brief_says_none() -> None:
    result = arbitrate(shadow=None, persona=None, plasticity=None, stability=stability(), catalog=CATALOG)
    text = render_brief(result.brief, CATALOG)
    assert text.splitlines() == [
        "Strategy: support",
        "Allowed moves: none",
        "Blocked moves (never use): none",
        "Escalation: none",
        "Missing signals: shadow, persona, plasticity",
    ]
