"""JSON schemas for constrained decoding, and the one place backends differ in spelling it."""

import copy
import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

ENUM_SOURCE_KEY = "x-enum-source"
# An optional property that only makes sense when its enum source has values (Shadow's
# resolutions of open predictions): without values it is left out of the schema altogether,
# since an empty enum breaks grammar compilers.
EMPTY_UNLESS_KEY = "x-empty-unless"
# llama.cpp's grammar ignores minimum/maximum, so small integer ranges become enums,
# which its grammar does enforce. Ranges wider than this stay as they are.
MAX_RANGE_AS_ENUM = 101
# llama-cpp-python's grammar converter unrolls maxLength into nested rules and refuses
# (then generates unconstrained) beyond a few hundred; longer limits are checked in Python.
MAX_GRAMMAR_STRING_LENGTH = 256


@functools.cache
def base_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The pydantic schema of an output model, built once per process."""
    return model.model_json_schema()


def json_schema_for(model: type[BaseModel], enums: Mapping[str, Sequence[Any]]) -> dict[str, Any]:
    """The model's schema with each `x-enum-source` field restricted to the given values."""
    schema = copy.deepcopy(base_schema(model))
    _drop_empty_optional(schema, enums)
    _inject_enums(schema, enums)
    _prune_unused_defs(schema)
    return schema


def _drop_empty_optional(node: Any, enums: Mapping[str, Sequence[Any]]) -> None:
    if isinstance(node, dict):
        properties = node.get("properties")
        if isinstance(properties, dict):
            for name, prop in list(properties.items()):
                source = prop.pop(EMPTY_UNLESS_KEY, None) if isinstance(prop, dict) else None
                if source is not None and not enums.get(source):
                    del properties[name]
                    if name in node.get("required", []):
                        node["required"] = [r for r in node["required"] if r != name]
        for value in node.values():
            _drop_empty_optional(value, enums)
    elif isinstance(node, list):
        for item in node:
            _drop_empty_optional(item, enums)


def _refs(node: Any, found: set[str]) -> set[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            found.add(node["$ref"])
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for item in node:
            _refs(item, found)
    return found


def _prune_unused_defs(schema: dict[str, Any]) -> None:
    """Leave out definitions nothing refers to any more (after _drop_empty_optional)."""
    defs = schema.get("$defs")
    while isinstance(defs, dict):
        used = _refs({k: v for k, v in schema.items() if k != "$defs"}, set()) | _refs(defs, set())
        unused = [name for name in defs if f"#/$defs/{name}" not in used]
        if not unused:
            break
        for name in unused:
            del defs[name]


def _inject_enums(node: Any, enums: Mapping[str, Sequence[Any]]) -> None:
    if isinstance(node, dict):
        source = node.pop(ENUM_SOURCE_KEY, None)
        if source is not None:
            values = list(enums.get(source, []))
            node["enum"] = values
        for value in list(node.values()):
            _inject_enums(value, enums)
        # An array of an empty enum can only be empty.
        items = node.get("items")
        if node.get("type") == "array" and isinstance(items, dict) and items.get("enum") == []:
            node["maxItems"] = 0
            node.pop("minItems", None)
            items.pop("enum")
    elif isinstance(node, list):
        for item in node:
            _inject_enums(item, enums)


def _shape_for_llamacpp_grammar(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") == "integer" and "minimum" in node and "maximum" in node and "enum" not in node:
            low, high = int(node["minimum"]), int(node["maximum"])
            if high - low + 1 <= MAX_RANGE_AS_ENUM:
                node["enum"] = list(range(low, high + 1))
        if node.get("type") == "string" and node.get("maxLength", 0) > MAX_GRAMMAR_STRING_LENGTH:
            del node["maxLength"]
        for value in node.values():
            _shape_for_llamacpp_grammar(value)
    elif isinstance(node, list):
        for item in node:
            _shape_for_llamacpp_grammar(item)


def response_format_for(kind: str, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """How each server kind is asked for JSON that follows `schema`.

    - vLLM and OpenAI take the standard `json_schema` form (vLLM's old `guided_json`
      extra is silently ignored since v0.12, so it is not used).
    - llama-cpp-python's server rejects `json_schema` and takes `json_object` with a
      `schema` key, compiled to a grammar that ignores numeric bounds and cannot hold
      long string limits; both are reshaped here and still checked by pydantic.
    """
    if kind == "llamacpp":
        shaped = copy.deepcopy(schema)
        _shape_for_llamacpp_grammar(shaped)
        return {"type": "json_object", "schema": shaped}
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


# vLLM serves lower numbers first (--scheduling-policy priority): Coach's streamed reply is what
# the coachee waits on; Synth and its critic end the turn; Shadow and the trio can wait.
AGENT_PRIORITY = {"coach": 0, "synth": 5, "critic": 5}
BACKGROUND_PRIORITY = 10


def extra_body_for(
    kind: str, *, thinking: bool, priority_of: str | None = None, cache_salt: str | None = None
) -> dict[str, Any]:
    """Server-specific request fields: Qwen3's thinking switch goes through the chat template;
    `priority_of` (an agent) asks a priority-scheduling vLLM to order the request by its role;
    `cache_salt` (vLLM's request field: non-empty, at most 128 characters, no '@', '/' or '\\')
    keeps one coachee's cached prompt prefix from being reused for another's request."""
    if kind != "vllm":
        return {}
    body: dict[str, Any] = {"chat_template_kwargs": {"enable_thinking": thinking}}
    if priority_of is not None:
        body["priority"] = AGENT_PRIORITY.get(priority_of, BACKGROUND_PRIORITY)
    if cache_salt:
        body["cache_salt"] = cache_salt
    return body


# --- The longest answer a schema allows -----------------------------------------------------------
# With the grammar enforcing maxLength and maxItems (vLLM's xgrammar does, no whitespace between
# tokens), an answer cannot grow past this bound, so a max_tokens at or above it never cuts one off:
# a small model looping inside a string is closed at the limit instead of running out of tokens.

# Tokens per character of string content with SmolLM2's tokenizer, for ordinary text in the costliest
# of the six languages: measured on /tokenize, en 0.22, fr 0.33, es 0.35, pt 0.34, de 0.38, ru 0.74
# (tests/test_embedded_model.py checks the bound holds); 0.8 leaves a margin over Russian.
TOKENS_PER_CHAR = 0.8
# A value whose enum is filled at call time (message ids, move keys) and is not known here.
UNKNOWN_ENUM_CHARS = 40


def longest_json(schema: dict[str, Any]) -> int:
    """Characters of the longest compact JSON document `schema` admits (strings at their maxLength)."""
    defs = schema.get("$defs", {})

    def size(node: dict[str, Any]) -> tuple[int, int]:  # (structure chars, string-content chars)
        if "$ref" in node:
            return size(defs[node["$ref"].rsplit("/", 1)[-1]])
        for key in ("anyOf", "oneOf"):
            if key in node:
                return max((size(option) for option in node[key]), key=sum)
        if "enum" in node or "const" in node:
            values = node.get("enum", [node.get("const")])
            longest = max((len(json.dumps(v, ensure_ascii=False)) for v in values), default=UNKNOWN_ENUM_CHARS)
            return longest, 0
        kind = node.get("type")
        if kind == "object":
            properties = node.get("properties", {})
            structure, content = 2 + max(0, len(properties) - 1), 0  # {} and the commas
            for name, prop in properties.items():
                s, c = size(prop)
                structure += len(json.dumps(name)) + 1 + s  # "name":value
                content += c
            return structure, content
        if kind == "array":
            if "maxItems" not in node:
                raise ValueError("an array without maxItems has no longest form")
            s, c = size(node.get("items", {}))
            count = int(node["maxItems"])
            return 2 + max(0, count - 1) + count * s, count * c
        if kind == "string":
            if "maxLength" not in node:
                raise ValueError("a string without maxLength has no longest form")
            return 2, int(node["maxLength"])
        if kind == "integer":
            return max(len(str(node.get("minimum", -(10**9)))), len(str(node.get("maximum", 10**9)))), 0
        if kind == "boolean":
            return 5, 0
        if kind == "null":
            return 4, 0
        if "x-enum-source" in node:
            return UNKNOWN_ENUM_CHARS, 0
        raise ValueError(f"no longest form for {node!r}")

    structure, content = size(schema)
    return structure + content


def longest_answer_tokens(schema: dict[str, Any]) -> int:
    """A bound on the tokens of the longest answer: JSON structure at about one token per two
    characters, string content at TOKENS_PER_CHAR."""
    structure = longest_json(_without_string_content(copy.deepcopy(schema)))
    content = longest_json(schema) - structure
    return int(structure / 2 + content * TOKENS_PER_CHAR) + 1


def _without_string_content(node: Any) -> Any:
    if isinstance(node, dict):
        if node.get("type") == "string" and "enum" not in node:
            node["maxLength"] = 0
        for value in node.values():
            _without_string_content(value)
    elif isinstance(node, list):
        for item in node:
            _without_string_content(item)
    return node


# The numeric ids an answer may cite (messages, predictions, questions), at their widest.
WIDEST_ID = 999_999_999


def answer_token_bound(model: type[BaseModel], *, move_keys: Sequence[str]) -> int:
    """The longest answer `model` admits, in tokens, with the catalog's move keys: the least
    max_tokens that never cuts one off."""
    ids: list[Any] = [WIDEST_ID]
    keys: list[Any] = list(move_keys) or ["x" * UNKNOWN_ENUM_CHARS]
    enums: dict[str, list[Any]] = {
        "moves": keys,
        "blocked_moves": keys,
        "message_ids": ids,
        "open_predictions": ids,
        "question_ids": ids,
    }
    return longest_answer_tokens(json_schema_for(model, enums))
