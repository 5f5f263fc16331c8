"""How answers are made up: JSON that fits a response schema, and coaching-flavoured free text."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import uuid
from typing import Any

MAX_DEPTH = 6  # beyond this, schema generation only fills what is required
# Free text and plain strings are drawn from this coaching-flavoured vocabulary: large enough
# that random text passes the quality gate's loop checks (agents.safety.quality), as prose does.
_VOCABULARY = (
    "you notice the breath and let your shoulders soften as each small step builds steady focus "
    "so keep going with calm curiosity today maybe tomorrow morning after work before dinner "
    "walk run read write plan rest sleep cook call ask try choose start finish pause return "
    "habit routine goal week evening weekend friend partner colleague family neighbour garden "
    "kitchen desk phone notebook calendar list timer window door coat shoes bottle water tea "
    "gentle honest brave patient careful quiet clear simple useful kind realistic flexible "
    "energy attention effort progress setback pattern choice reason promise reminder signal "
    "really often sometimes rarely usually perhaps gradually slowly quickly together alone "
    "what would help here could might feel seem matter change notice wonder remember imagine "
    "first second next last one two three few several enough more less whole half quarter"
)
_WORDS = tuple(_VOCABULARY.split())


def _gibberish(rng: random.Random) -> str:
    syllables = (rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4)))
    return "".join(syllables) + rng.choice("xqrk")


def free_text(rng: random.Random, n_tokens: int, *, nonsense: bool = False) -> str:
    """Coaching-like sentences of exactly ``n_tokens`` tokens (words and periods)."""
    sentences: list[str] = []
    used = 0
    while used < n_tokens:
        length = min(n_tokens - used, rng.randint(6, 12))  # tokens, period included
        words = [_gibberish(rng) if nonsense else rng.choice(_WORDS) for _ in range(max(length - 1, 1))]
        words[0] = words[0].capitalize()
        sentences.append(" ".join(words) + ("." if length > 1 else ""))
        used += length
    return " ".join(sentences)


class SchemaFaker:
    """Builds a JSON value valid against a JSON schema (the subset LLM servers use)."""

    def __init__(self, root: Any, rng: random.Random, *, nonsense: bool = False) -> None:
        self.root = root if isinstance(root, dict) else {}
        self.rng = rng
        self.nonsense = nonsense  # gibberish strings, still schema-valid

    def generate(self, node: Any = None, depth: int = 0) -> Any:
        node = self._resolve(self.root if node is None else node)
        if "const" in node:
            return node["const"]
        if node.get("enum"):
            return self.rng.choice(node["enum"])
        for key in ("anyOf", "oneOf"):
            if node.get(key):
                options = [self._resolve(o) for o in node[key]]
                non_null = [o for o in options if o.get("type") != "null"]
                nulls = [o for o in options if o.get("type") == "null"]
                # Prefer the first real option; when deep, null stops recursion.
                pick = (nulls if depth >= MAX_DEPTH and nulls else non_null or options)[0]
                return self.generate(pick, depth)
        kind = node.get("type")
        if isinstance(kind, list):
            kind = next((t for t in kind if t != "null"), "null")
        if kind is None:
            if "default" in node:
                return node["default"]
            kind = "object" if "properties" in node else "array" if "items" in node else "string"
        if kind == "object":
            return self._object(node, depth)
        if kind == "array":
            return self._array(node, depth)
        if kind == "integer":
            return self._integer(node)
        if kind == "number":
            return self._number(node)
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "null":
            return None
        return self._string(node)

    def _lookup(self, ref: str) -> Any:
        target: Any = self.root
        for part in ref.lstrip("#").strip("/").split("/") if ref.strip("#/") else []:
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return target

    def _resolve(self, raw: Any) -> dict[str, Any]:
        """Follow $ref chains and merge allOf, so callers see one plain schema."""
        if not isinstance(raw, dict):
            return {}  # boolean schemas: anything goes
        node: dict[str, Any] = raw
        for _ in range(32):  # bounded: refs may be cyclic
            if "$ref" not in node:
                break
            target: Any = self._lookup(node["$ref"])
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            node = {**(target if isinstance(target, dict) else {}), **siblings}
        if "allOf" in node:
            merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
            for sub in map(self._resolve, node["allOf"]):
                for key, value in sub.items():
                    if key == "properties":
                        merged["properties"] = {**value, **merged.get("properties", {})}
                    elif key == "required":
                        merged["required"] = [*merged.get("required", []), *value]
                    else:
                        merged.setdefault(key, value)
            node = merged
        return node

    def _object(self, node: dict[str, Any], depth: int) -> dict[str, Any]:
        required = list(node.get("required", []))
        out: dict[str, Any] = {}
        for name, sub in (node.get("properties") or {}).items():
            if depth < MAX_DEPTH or name in required:  # fill all properties unless deep
                out[name] = self.generate(sub, depth + 1)
        extra = node.get("additionalProperties")
        for name in required:
            if name not in out:
                out[name] = self.generate(extra if isinstance(extra, dict) else {}, depth + 1)
        return out

    def _array(self, node: dict[str, Any], depth: int) -> list[Any]:
        if node.get("prefixItems"):
            return [self.generate(sub, depth + 1) for sub in node["prefixItems"]]
        items = self._resolve(node.get("items", {}))
        count = int(node.get("minItems", 0))
        count = max(count, 1) if depth < MAX_DEPTH else count
        if node.get("maxItems") is not None:
            count = min(count, int(node["maxItems"]))
        if items.get("enum") and "const" not in items:
            values = list(items["enum"])  # distinct values when the enum allows it
            if count <= len(values):
                return self.rng.sample(values, count)
            return [self.rng.choice(values) for _ in range(count)]
        out: list[Any] = []
        seen: set[str] = set()
        for _ in range(count):
            for _attempt in range(5 if node.get("uniqueItems") else 1):
                value = self.generate(items, depth + 1)
                key = json.dumps(value, sort_keys=True, default=str)
                if key not in seen:
                    break
            seen.add(key)
            out.append(value)
        return out

    @staticmethod
    def _bounds(node: dict[str, Any]) -> tuple[float | None, float | None, bool, bool]:
        lo, hi = node.get("minimum"), node.get("maximum")
        lo_ex = hi_ex = False
        x_lo, x_hi = node.get("exclusiveMinimum"), node.get("exclusiveMaximum")
        if isinstance(x_lo, bool):  # draft-4 style flag
            lo_ex = x_lo
        elif isinstance(x_lo, (int, float)) and (lo is None or x_lo >= lo):
            lo, lo_ex = x_lo, True
        if isinstance(x_hi, bool):
            hi_ex = x_hi
        elif isinstance(x_hi, (int, float)) and (hi is None or x_hi <= hi):
            hi, hi_ex = x_hi, True
        return lo, hi, lo_ex, hi_ex

    def _integer(self, node: dict[str, Any]) -> int:
        lo_f, hi_f, lo_ex, hi_ex = self._bounds(node)
        lo = None if lo_f is None else (math.floor(lo_f) + 1 if lo_ex else math.ceil(lo_f))
        hi = None if hi_f is None else (math.ceil(hi_f) - 1 if hi_ex else math.floor(hi_f))
        lo = lo if lo is not None else (0 if hi is None else hi - 100)
        hi = hi if hi is not None else lo + 100
        if lo > hi:
            return lo  # unsatisfiable schema; any answer is wrong
        step = node.get("multipleOf")
        if isinstance(step, int) and step > 0 and math.ceil(lo / step) <= hi // step:
            return self.rng.randint(math.ceil(lo / step), hi // step) * step
        return self.rng.randint(lo, hi)

    def _number(self, node: dict[str, Any]) -> float:
        lo_b, hi_b, lo_ex, hi_ex = self._bounds(node)
        lo = float(lo_b) if lo_b is not None else (0.0 if hi_b is None else float(hi_b) - 100)
        hi = float(hi_b) if hi_b is not None else lo + 100
        value = round(self.rng.uniform(lo, hi), 2)
        if not ((value > lo if lo_ex else value >= lo) and (value < hi if hi_ex else value <= hi)):
            value = (lo + hi) / 2  # rounding hit a bound; the midpoint is inside
        return value

    def _string(self, node: dict[str, Any]) -> str:
        rng, fmt = self.rng, node.get("format")
        if fmt == "date":
            return (dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(0, 700))).isoformat()
        if fmt == "date-time":
            start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
            return (start + dt.timedelta(seconds=rng.randint(0, 60_000_000))).isoformat()
        if fmt == "time":
            return f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00"
        if fmt == "uuid":
            return str(uuid.UUID(int=rng.getrandbits(128), version=4))
        if fmt == "email":
            return f"sim{rng.randint(1, 999)}@example.com"
        if fmt in ("uri", "url"):
            return f"https://example.com/sim/{rng.randint(1, 999)}"

        def word() -> str:
            return _gibberish(rng) if self.nonsense else rng.choice(_WORDS)

        min_len, max_len = int(node.get("minLength", 0)), node.get("maxLength")
        # A sentence where a field holds prose (a reply), a few words where it holds a label.
        words = rng.randint(6, 14) if max_len is None or int(max_len) >= 120 else rng.randint(2, 5)
        text = " ".join(word() for _ in range(words))
        while len(text) < min_len:
            text += " " + word()
        if max_len is not None:
            text = text[: int(max_len)].rstrip()
        return text.ljust(min_len, "x")


def response_schema(response_format: Any) -> tuple[str | None, Any]:
    """(response_format type, schema or None) for OpenAI and llama.cpp forms."""
    if not isinstance(response_format, dict):
        return None, None
    kind = response_format.get("type")
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        return kind, spec.get("schema", {}) if isinstance(spec, dict) else {}
    if kind == "json_object":
        return kind, response_format.get("schema")
    return kind if isinstance(kind, str) else None, None
