"""The longest answer a JSON schema admits, built as a document: every list full, every string at
its maxLength (filled from a given text), numbers at their widest, the longest enum value."""

from __future__ import annotations

import itertools
import json
from typing import Any


def longest_example(schema: dict[str, Any], filler: str) -> Any:
    defs = schema.get("$defs", {})
    letters = itertools.cycle(filler)

    def build(node: dict[str, Any]) -> Any:
        if "$ref" in node:
            return build(defs[node["$ref"].rsplit("/", 1)[-1]])
        for key in ("anyOf", "oneOf"):
            if key in node:
                options = [build(option) for option in node[key]]
                return max(options, key=lambda value: len(compact(value)))
        if "enum" in node:
            return max(node["enum"], key=lambda value: len(compact(value)))
        kind = node.get("type")
        if kind == "object":
            return {name: build(prop) for name, prop in node.get("properties", {}).items()}
        if kind == "array":
            return [build(node["items"]) for _ in range(node["maxItems"])]
        if kind == "string":
            return "".join(next(letters) for _ in range(node["maxLength"]))
        if kind == "integer":
            return max(node["minimum"], node["maximum"], key=lambda n: len(str(n)))
        if kind == "boolean":
            return False
        if kind == "null":
            return None
        raise ValueError(f"no longest form for {node!r}")

    return build(schema)


def compact(value: Any) -> str:
    """JSON as vLLM's grammar writes it with disable_any_whitespace: no space between tokens."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
