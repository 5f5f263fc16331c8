"""JSON schemas for constrained decoding, and the one place backends differ in spelling it."""

import copy
import functools
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


def extra_body_for(kind: str, *, thinking: bool) -> dict[str, Any]:
    """Server-specific request fields: Qwen3's thinking switch goes through the chat template."""
    if kind == "vllm":
        return {"chat_template_kwargs": {"enable_thinking": thinking}}
    return {}
