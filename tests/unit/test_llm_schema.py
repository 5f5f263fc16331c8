"""JSON schemas for constrained decoding: enum injection and each backend's spelling."""

from __future__ import annotations

import copy
import json
import random
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, ValidationError

from agents.llm.schema import (
    ENUM_SOURCE_KEY,
    MAX_RANGE_AS_ENUM,
    TOKENS_PER_CHAR,
    answer_token_bound,
    base_schema,
    extra_body_for,
    json_schema_for,
    longest_json,
    response_format_for,
)
from agents.llm.simulator.faker import SchemaFaker
from agents.roles.schemas import (
    OUTPUT_SCHEMAS,
    CriticOutput,
    PlasticityOutput,
    ShadowOutput,
    StabilityOutput,
    SynthOutput,
)
from tests.support.schemas import compact, longest_example

MOVES = ["open_question", "tiny_next_step", "direct_challenge"]
ENUMS: dict[str, list[Any]] = {
    "moves": MOVES,
    "message_ids": [11, 12, 15],
    "blocked_moves": ["direct_challenge"],
    "question_ids": [0, 2],
}

# What a JSON Schema node may say, in the subset pydantic emits for these models.
KNOWN_KEYWORDS = {
    "$defs",
    "$ref",
    "type",
    "properties",
    "required",
    "items",
    "enum",
    "const",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "additionalProperties",
    "title",
    "description",
    "anyOf",
    "default",
}
JSON_TYPES = {"object", "array", "string", "integer", "number", "boolean", "null"}
PY_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float)}


def nodes(schema: Any) -> list[dict[str, Any]]:
    """Every schema object inside `schema` (values of properties, items, $defs, anyOf...)."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            found.append(node)
            for key in ("properties", "$defs"):
                for sub in (node.get(key) or {}).values():
                    walk(sub)
            for key in ("items", "additionalProperties"):
                if isinstance(node.get(key), dict):
                    walk(node[key])
            for sub in node.get("anyOf") or []:
                walk(sub)

    walk(schema)
    return found


def resolve(root: dict[str, Any], ref: str) -> Any:
    if not ref.startswith("#/"):
        raise LookupError(f"{ref} is not a local reference")
    target: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(target, dict) or part not in target:
            raise LookupError(f"{ref} does not resolve")
        target = target[part]
    return target


def structural_problems(root: dict[str, Any]) -> list[str]:
    """What would make `root` an invalid (or unsatisfiable) JSON Schema for these models."""
    problems: list[str] = []
    json.dumps(root)  # serialisable
    for node in nodes(root):
        for key in node:
            if key not in KNOWN_KEYWORDS:
                problems.append(f"unknown keyword {key!r}")
        if "$ref" in node:
            try:
                target = resolve(root, node["$ref"])
            except LookupError as exc:
                problems.append(str(exc))
            else:
                if not isinstance(target, dict):
                    problems.append(f"{node['$ref']} is not a schema")
        kind = node.get("type")
        if kind is not None and kind not in JSON_TYPES:
            problems.append(f"bad type {kind!r}")
        if kind == "object":
            properties = node.get("properties", {})
            if not isinstance(properties, dict):
                problems.append("properties is not an object")
            missing = set(node.get("required", [])) - set(properties)
            if missing:
                problems.append(f"required names unknown properties {sorted(missing)}")
        if kind == "array" and not isinstance(node.get("items"), dict):
            problems.append("array without an items schema")
        if "enum" in node:
            values = node["enum"]
            if not isinstance(values, list) or not values:
                problems.append(f"enum must be a non-empty list, got {values!r}")
            elif kind in PY_TYPES:
                wrong = [v for v in values if not isinstance(v, PY_TYPES[kind]) or isinstance(v, bool)]
                if wrong:
                    problems.append(f"enum values {wrong!r} are not of type {kind}")
            if isinstance(values, list) and len(set(map(json.dumps, values))) != len(values):
                problems.append("enum values repeat")
        for low, high in (("minimum", "maximum"), ("minLength", "maxLength"), ("minItems", "maxItems")):
            if low in node and high in node and node[low] > node[high]:
                problems.append(f"{low} {node[low]} > {high} {node[high]}")
            for bound in (low, high):
                if bound in node and not isinstance(node[bound], int):
                    problems.append(f"{bound} is not an integer")
    return problems


def enum_sources(schema: Any) -> list[str]:
    return [node[ENUM_SOURCE_KEY] for node in nodes(schema) if ENUM_SOURCE_KEY in node]


# --- enum injection ---------------------------------------------------------------------


def test_base_schemas_carry_the_marker_where_expected() -> None:
    assert enum_sources(base_schema(PlasticityOutput)) == ["moves"]
    assert enum_sources(base_schema(StabilityOutput)) == ["moves"]
    assert enum_sources(base_schema(CriticOutput)) == ["blocked_moves"]
    assert enum_sources(base_schema(SynthOutput)) == ["moves"]
    assert sorted(enum_sources(base_schema(ShadowOutput))) == ["message_ids", "open_predictions"]


def test_moves_are_injected_as_an_enum_and_the_marker_is_stripped() -> None:
    schema = json_schema_for(PlasticityOutput, ENUMS)
    items = schema["properties"]["suggested_moves"]["items"]
    assert items["enum"] == MOVES
    assert items["type"] == "string"
    assert ENUM_SOURCE_KEY not in json.dumps(schema)
    assert schema["properties"]["suggested_moves"]["minItems"] == 1
    assert schema["properties"]["suggested_moves"]["maxItems"] == 3


def test_message_ids_are_injected_inside_definitions() -> None:
    schema = json_schema_for(ShadowOutput, ENUMS)
    evidenced = schema["$defs"]["EvidencedItem"]["properties"]["evidence"]
    assert evidenced["items"]["enum"] == [11, 12, 15]
    assert evidenced["items"]["type"] == "integer"
    assert ENUM_SOURCE_KEY not in json.dumps(schema)


def test_blocked_moves_are_injected_for_the_critic() -> None:
    schema = json_schema_for(CriticOutput, {"blocked_moves": ["direct_challenge", "stretch_goal"]})
    assert schema["properties"]["violated_moves"]["items"]["enum"] == ["direct_challenge", "stretch_goal"]
    assert "maxItems" in schema["properties"]["violated_moves"]
    assert schema["properties"]["violated_moves"]["maxItems"] == 5


def test_an_empty_enum_makes_the_array_empty() -> None:
    critic = json_schema_for(CriticOutput, {"blocked_moves": []})["properties"]["violated_moves"]
    assert critic["maxItems"] == 0
    assert "enum" not in critic["items"]
    assert ENUM_SOURCE_KEY not in critic["items"]

    # A missing source counts as empty; minItems goes, or the array could not be satisfied.
    plasticity = json_schema_for(PlasticityOutput, {})["properties"]["suggested_moves"]
    assert plasticity["maxItems"] == 0
    assert "minItems" not in plasticity
    assert "enum" not in plasticity["items"]


def test_injection_does_not_touch_the_cached_base_schema() -> None:
    before = copy.deepcopy(base_schema(SynthOutput))
    first = json_schema_for(SynthOutput, {"moves": ["a"]})
    second = json_schema_for(SynthOutput, {"moves": ["b", "c"]})
    assert first["properties"]["moves_used"]["items"]["enum"] == ["a"]
    assert second["properties"]["moves_used"]["items"]["enum"] == ["b", "c"]
    assert base_schema(SynthOutput) == before
    assert base_schema(SynthOutput)["properties"]["moves_used"]["items"][ENUM_SOURCE_KEY] == "moves"


# --- every output schema is a usable JSON Schema -----------------------------------------


@pytest.mark.parametrize("agent", sorted(OUTPUT_SCHEMAS))
def test_every_output_schema_is_structurally_valid_after_injection(agent: str) -> None:
    schema = json_schema_for(OUTPUT_SCHEMAS[agent], ENUMS)
    assert structural_problems(schema) == []
    assert ENUM_SOURCE_KEY not in json.dumps(schema)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize("agent", sorted(OUTPUT_SCHEMAS))
def test_every_llamacpp_schema_is_structurally_valid(agent: str) -> None:
    shaped = response_format_for("llamacpp", agent, json_schema_for(OUTPUT_SCHEMAS[agent], ENUMS))["schema"]
    assert structural_problems(shaped) == []


@pytest.mark.parametrize("agent", sorted(OUTPUT_SCHEMAS))
@pytest.mark.parametrize("seed", range(5))
def test_values_built_from_the_schema_pass_the_model_with_the_same_context(agent: str, seed: int) -> None:
    # The schema and the validator must agree: whatever the schema allows, validation accepts.
    schema = json_schema_for(OUTPUT_SCHEMAS[agent], ENUMS)
    value = SchemaFaker(schema, random.Random(seed)).generate()
    context = {key: set(values) for key, values in ENUMS.items()}
    OUTPUT_SCHEMAS[agent].model_validate(value, context=context)


def test_the_checker_notices_a_dangling_ref() -> None:
    # The structural checker itself must be able to fail.
    schema = json_schema_for(PlasticityOutput, ENUMS)
    schema["properties"]["preferences"]["$ref"] = "#/$defs/Nowhere"
    assert structural_problems(schema) == ["#/$defs/Nowhere does not resolve"]
    schema = json_schema_for(CriticOutput, ENUMS)
    schema["properties"]["violated_moves"]["items"]["enum"] = []
    assert structural_problems(schema) == ["enum must be a non-empty list, got []"]


# --- the same sets are enforced by validation through the context ------------------------


def plasticity_payload(moves: list[str]) -> dict[str, Any]:
    return {
        "preferences": {"directness": 3, "warmth": 3, "structure": 3, "challenge": 3, "pacing": 3},
        "strategy": "explore",
        "suggested_moves": moves,
        "rationale": "Because.",
    }


def test_validation_accepts_a_move_in_the_context() -> None:
    output = PlasticityOutput.model_validate(plasticity_payload(["tiny_next_step"]), context={"moves": set(MOVES)})
    assert output.suggested_moves == ["tiny_next_step"]


def test_validation_rejects_a_move_not_in_the_context() -> None:
    with pytest.raises(ValidationError) as info:
        PlasticityOutput.model_validate(plasticity_payload(["stretch_goal"]), context={"moves": set(MOVES)})
    assert [e["loc"] for e in info.value.errors()] == [("suggested_moves", 0)]


def test_validation_without_a_context_does_not_restrict_moves() -> None:
    output = PlasticityOutput.model_validate(plasticity_payload(["anything_goes"]))
    assert output.suggested_moves == ["anything_goes"]


def test_validation_checks_message_ids_and_blocked_moves_too() -> None:
    shadow = {
        "stated_goals": [{"text": "Run", "evidence": [12]}],
        "revealed_priorities": [],
        "follow_through": {"commitment": "Run", "probability_pct": 50, "horizon_days": 2, "rationale": "r"},
        "pattern_class": "unclear",
        "pattern_confidence_pct": 10,
    }
    ShadowOutput.model_validate(shadow, context={"message_ids": {12}})
    with pytest.raises(ValidationError):
        ShadowOutput.model_validate(shadow, context={"message_ids": {11}})

    critic = {"violated_moves": ["direct_challenge"], "unsafe_content": [], "explanation": "x"}
    CriticOutput.model_validate(critic, context={"blocked_moves": {"direct_challenge"}})
    with pytest.raises(ValidationError):
        CriticOutput.model_validate(critic, context={"blocked_moves": set()})


# --- backend spellings -------------------------------------------------------------------


class Wide(BaseModel):
    small: Annotated[int, Field(ge=1, le=5)]
    percent: Annotated[int, Field(ge=0, le=100)]
    wide: Annotated[int, Field(ge=0, le=MAX_RANGE_AS_ENUM)]  # 102 values: too many
    open_ended: Annotated[int, Field(ge=0)]
    fixed: Annotated[int, Field(ge=1, le=3)] = Field(json_schema_extra={"enum": [1, 3]})


def test_llamacpp_gets_json_object_with_small_ranges_as_enums() -> None:
    schema = Wide.model_json_schema()
    original = copy.deepcopy(schema)
    response_format = response_format_for("llamacpp", "wide_output", schema)
    assert set(response_format) == {"type", "schema"}
    assert response_format["type"] == "json_object"
    props = response_format["schema"]["properties"]
    assert props["small"]["enum"] == [1, 2, 3, 4, 5]
    assert props["percent"]["enum"] == list(range(101))
    assert "enum" not in props["wide"]
    assert "enum" not in props["open_ended"]
    assert props["fixed"]["enum"] == [1, 3]  # an existing enum is kept as it is
    assert schema == original  # the caller's schema is not changed


def test_llamacpp_shapes_ranges_inside_definitions() -> None:
    shaped = response_format_for("llamacpp", "plasticity_output", json_schema_for(PlasticityOutput, ENUMS))["schema"]
    preferences = shaped["$defs"]["CommunicationPreferences"]["properties"]
    assert preferences["warmth"]["enum"] == [1, 2, 3, 4, 5]
    assert shaped["properties"]["suggested_moves"]["items"]["enum"] == MOVES


@pytest.mark.parametrize("kind", ["vllm", "openai"])
def test_vllm_and_openai_get_the_standard_json_schema_form(kind: str) -> None:
    schema = json_schema_for(CriticOutput, ENUMS)
    response_format = response_format_for(kind, "critic_output", schema)
    assert response_format == {
        "type": "json_schema",
        "json_schema": {"name": "critic_output", "schema": schema, "strict": True},
    }
    # Bounds stay bounds: only llama.cpp needs them spelled as enums.
    shaped = response_format_for(kind, "shadow_output", json_schema_for(ShadowOutput, ENUMS))
    assert "enum" not in shaped["json_schema"]["schema"]["properties"]["pattern_confidence_pct"]


def test_extra_body_sends_the_thinking_switch_only_to_vllm() -> None:
    assert extra_body_for("vllm", thinking=True) == {"chat_template_kwargs": {"enable_thinking": True}}
    assert extra_body_for("vllm", thinking=False) == {"chat_template_kwargs": {"enable_thinking": False}}
    assert extra_body_for("llamacpp", thinking=True) == {}
    assert extra_body_for("openai", thinking=True) == {}


# --- The longest answer a schema admits -------------------------------------------------------------

BOUND_ENUMS: dict[str, list[Any]] = {
    "moves": ["reflect_feelings", "accountability_checkin"],
    "blocked_moves": ["accountability_checkin"],
    "message_ids": [7, 123456],
    "open_predictions": [42],
    "question_ids": list(range(12)),
}


@pytest.mark.parametrize("agent", sorted(OUTPUT_SCHEMAS))
def test_longest_json_is_the_length_of_the_longest_valid_answer(agent: str) -> None:
    """Built as a document (every list full, every string at its limit), the longest answer is valid
    and exactly as long as the bound says: the bound is neither loose nor short."""
    schema = json_schema_for(OUTPUT_SCHEMAS[agent], BOUND_ENUMS)
    example = longest_example(schema, filler="abc")
    context = {key: set(values) for key, values in BOUND_ENUMS.items()}
    OUTPUT_SCHEMAS[agent].model_validate(example, context=context)
    assert len(compact(example)) == longest_json(schema)


def test_a_string_or_list_without_a_limit_has_no_longest_form() -> None:
    class Open(BaseModel):
        notes: list[Annotated[str, Field(max_length=10)]]

    with pytest.raises(ValueError, match="maxItems"):
        longest_json(base_schema(Open))


def test_the_token_bound_counts_content_at_the_costly_rate_and_structure_at_half() -> None:
    class One(BaseModel):
        text: Annotated[str, Field(max_length=100)]

    schema = base_schema(One)
    structure = len('{"text":""}')
    assert longest_json(schema) == structure + 100
    assert answer_token_bound(One, move_keys=[]) == int(structure / 2 + 100 * TOKENS_PER_CHAR) + 1


@pytest.mark.django_db
def test_every_seeded_budget_fits_its_agents_longest_answer() -> None:
    from agents.models import AgentConfig, CoachingMove

    keys = list(CoachingMove.objects.values_list("key", flat=True))
    budgets = dict(AgentConfig.objects.filter(agent__in=OUTPUT_SCHEMAS).values_list("agent", "max_tokens"))
    assert set(budgets) == set(OUTPUT_SCHEMAS)
    for agent, budget in budgets.items():
        assert budget >= answer_token_bound(OUTPUT_SCHEMAS[agent], move_keys=keys), agent
