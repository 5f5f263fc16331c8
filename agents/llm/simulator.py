"""Simulated OpenAI-compatible LLM server for tests and benchmarks.

Stands in for vLLM / llama.cpp: a real HTTP server (Starlette app on uvicorn)
so other processes can call it with the official ``openai`` client.

* ``python -m agents.llm.simulator --port 8090`` runs it in the foreground.
* ``SimulatorServer(port=0, ttft_ms=10).start()`` runs it in a background thread.
* ``start_simulator_process()`` runs it as a subprocess; ``SimulatorControl``
  steers any instance over HTTP (``/_sim/config``, ``/_sim/reset``, ``/_sim/calls``).

The agent is taken from the ``X-Coaching-Agent`` header ("default" if absent).
Profile keys (per agent, merged over the default profile): see ``Profile``.

Tokenizer: deterministic and model-free. A token is one word of at most 12 word
characters, or one punctuation character, each with its leading whitespace;
trailing whitespace is its own token. Concatenating the pieces reproduces the
text exactly, which is also how streamed content is chunked. Token ids are a
CRC32 of the piece. This module must not import Django: it runs standalone.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import dataclasses
import datetime as dt
import hashlib
import json
import logging
import math
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
import zlib
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

MAX_MODEL_LEN = 32768
MAX_CHUNK_TIMES = 200
MAX_DEPTH = 6  # beyond this, schema generation only fills what is required
FAULTS = frozenset(
    {
        "http_500",
        "http_429",
        "http_400",
        "timeout",
        "hang",
        "truncated_json",
        "invalid_json",
        "nonsense",
        "slow_stream",
        "drop",
    }
)
# Only these let a call consume a scripted output, so a retry after a fault gets it.
_SCRIPT_FAULTS = frozenset({None, "truncated_json", "slow_stream"})
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
_INVALID_JSON = ('{"oops": ', "Sure! Here is the JSON you asked for: {", "I cannot answer that in JSON.")
_PROJECT_ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class Profile:
    """Behaviour of one agent; every field is a config key (``times`` is an alias of ``fault_times``).

    A script item is consumed only by a call that delivers content (no fault, or
    truncated_json / slow_stream), so a retry after an injected failure gets it.
    Setting fault/fault_times or script via ``configure`` restarts that counter.
    """

    ttft_ms: float = 200.0  # delay before the first content token
    tokens_per_s: float = 100.0  # <= 0 means no delay between tokens
    output_tokens: int = 40  # length of generated free text
    jitter: float = 0.0  # each delay is scaled by uniform(1 - jitter, 1 + jitter)
    fault: str | None = None  # one of FAULTS
    fault_times: int | None = None  # fault applies to the first N calls only (None: all)
    delay_s: float = 3600.0  # how long "timeout"/"hang" stall
    drop_after_tokens: int = 3  # "drop" closes the stream after this many tokens
    slow_tokens_per_s: float = 2.0  # rate under "slow_stream"
    script: tuple[Any, ...] = ()  # outputs consumed in order (str or JSON-able)
    repeat_last: bool = False  # when the script is exhausted, repeat its last item


_PROFILE_KEYS = frozenset(f.name for f in dataclasses.fields(Profile))


def _validate_profile(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Normalise a partial profile; raise ValueError on unknown keys or bad values."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        key = "fault_times" if key == "times" else key  # accepted alias
        if key not in _PROFILE_KEYS:
            raise ValueError(f"unknown profile key {key!r}")
        if key == "fault":
            value = None if value in (None, "", "none") else value
            if value is not None and value not in FAULTS:
                raise ValueError(f"unknown fault {value!r}; expected one of {sorted(FAULTS)}")
        elif key == "script":
            value = () if value is None else value
            if not isinstance(value, (list, tuple)):
                raise ValueError("script must be a list")
            value = tuple(copy.deepcopy(list(value)))
        elif key == "repeat_last":
            value = bool(value)
        elif key == "fault_times" and value is None:
            pass
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{key} must be a non-negative number")
        elif key in ("output_tokens", "drop_after_tokens", "fault_times"):
            value = int(value)
        elif key == "jitter" and value > 1:
            raise ValueError("jitter must be within 0..1")
        out[key] = value
    return out


# --- tokenizer -------------------------------------------------------------

_TOKEN_RE = re.compile(r"\s*\w{1,12}|\s*[^\w\s]|\s+")


def token_pieces(text: str) -> list[str]:
    """Split text into token strings whose concatenation is exactly ``text``."""
    return _TOKEN_RE.findall(text)


def tokenize(text: str) -> list[int]:
    return [zlib.crc32(piece.encode()) % 50_000 + 1_000 for piece in token_pieces(text)]


def messages_to_text(messages: list[Any]) -> str:
    """The simulated chat template; prompt_tokens counts the tokens of this."""
    parts: list[str] = []
    for message in messages:
        message = message if isinstance(message, dict) else {}
        content = message.get("content")
        if isinstance(content, list):  # multi-part content: keep the text parts
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(f"<|{message.get('role', '')}|>\n{content or ''}\n")
    return "".join(parts) + "<|assistant|>\n"


def messages_sha(messages: Any) -> str:
    """sha256 of the canonical JSON of the messages, as recorded in the call log."""
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


# --- content generation ----------------------------------------------------


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


def _response_schema(response_format: Any) -> tuple[str | None, Any]:
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


# --- state: config, scripts, fault budgets, call log ------------------------


@dataclasses.dataclass
class _Plan:
    """Everything decided up front for one chat call."""

    record: dict[str, Any]
    profile: Profile
    fault: str | None
    stream: bool
    include_usage: bool
    model: str
    pieces: list[str] = dataclasses.field(default_factory=list)
    finish_reason: str = "stop"
    offsets: list[float] = dataclasses.field(default_factory=list)  # token emission times from start
    total_s: float = 0.0  # non-streaming total generation time


class SimulatorState:
    """Thread-safe config and call log shared by the app and in-process callers."""

    def __init__(self, *, model: str = "sim-model", seed: int = 0, **default_profile: Any) -> None:
        self.model = model
        self.seed = seed
        self._startup = _validate_profile(default_profile)
        self._lock = threading.Lock()
        self._seq = 0
        # Chat requests being served right now, and the most at once since the last reset: what
        # a concurrency limit on the client side must keep at or under its bound.
        self._in_flight = 0
        self._max_in_flight = 0
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._default: dict[str, Any] = {}
            self._agents: dict[str, dict[str, Any]] = {}
            self._calls: list[dict[str, Any]] = []
            self._call_index: defaultdict[str, int] = defaultdict(int)
            self._faults_used: defaultdict[str, int] = defaultdict(int)
            self._script_pos: defaultdict[str, int] = defaultdict(int)
            # Requests still running keep counting; the maximum starts again from them.
            self._max_in_flight = self._in_flight

    def request_started(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def request_ended(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def concurrency(self) -> dict[str, int]:
        """Chat requests in flight now, and the most at once since the last reset."""
        with self._lock:
            return {"in_flight": self._in_flight, "max_in_flight": self._max_in_flight}

    def configure(
        self, default: Mapping[str, Any] | None = None, agents: Mapping[str, Mapping[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Merge profile overrides; (re)setting a fault or script restarts its counter."""
        new_default = _validate_profile(default or {})
        new_agents = {str(name): _validate_profile(p) for name, p in (agents or {}).items()}
        with self._lock:
            self._default.update(new_default)
            if {"fault", "fault_times"} & new_default.keys():
                self._faults_used.clear()
            if "script" in new_default:
                self._script_pos.clear()
            for name, profile in new_agents.items():
                self._agents.setdefault(name, {}).update(profile)
                if {"fault", "fault_times"} & profile.keys():
                    self._faults_used.pop(name, None)
                if "script" in profile:
                    self._script_pos.pop(name, None)
        return self.config()

    def config(self) -> dict[str, Any]:
        with self._lock:
            default = dataclasses.asdict(self._profile_locked(None))
            return {"model": self.model, "seed": self.seed, "default": default, "agents": copy.deepcopy(self._agents)}

    def profile_for(self, agent: str) -> Profile:
        with self._lock:
            return self._profile_locked(agent)

    def _profile_locked(self, agent: str | None) -> Profile:
        overrides = self._agents.get(agent, {}) if agent is not None else {}
        return Profile(**{**self._startup, **self._default, **overrides})

    def calls(self, agent: str | None = None, turn: str | int | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [
                {**c, "chunk_times": list(c["chunk_times"])}
                for c in self._calls
                if (agent is None or c["agent"] == agent) and (turn is None or c["turn"] == str(turn))
            ]

    def plan_call(self, agent: str, turn: str | None, body: dict[str, Any], received_at: float) -> _Plan:
        messages = body.get("messages") or []
        rf_type, schema = _response_schema(body.get("response_format"))
        with self._lock:
            self._seq += 1
            index = self._call_index[agent]
            self._call_index[agent] += 1
            profile = self._profile_locked(agent)
            fault = profile.fault
            if fault and profile.fault_times is not None and self._faults_used[agent] >= profile.fault_times:
                fault = None
            if fault:
                self._faults_used[agent] += 1
            scripted: Any = None
            has_script = fault in _SCRIPT_FAULTS and bool(profile.script)
            if has_script:
                pos = self._script_pos[agent]
                if pos < len(profile.script) or profile.repeat_last:
                    scripted = profile.script[min(pos, len(profile.script) - 1)]
                    self._script_pos[agent] = pos + 1
                else:
                    has_script = False
            record: dict[str, Any] = {
                "id": f"chatcmpl-sim-{self._seq}",
                "agent": agent,
                "turn": turn,
                "index": index,
                "stream": bool(body.get("stream")),
                "received_at": received_at,
                "first_token_at": None,
                "finished_at": None,
                "chunk_times": [],
                "prompt_tokens": len(token_pieces(messages_to_text(messages))),
                "completion_tokens": 0,
                "finish_reason": None,
                "fault": fault,
                "cancelled": False,
                "status": None,
                "response_format_type": rf_type,
                "messages_sha": messages_sha(messages),
                "scripted": has_script,
                "model": body.get("model") or self.model,
                "priority": body.get("priority"),  # vLLM's per-request priority, when sent
                "cache_salt": body.get("cache_salt"),  # vLLM's per-request prefix-cache salt
                "frequency_penalty": body.get("frequency_penalty"),
            }
            self._calls.append(record)
        options = body.get("stream_options") or {}
        plan = _Plan(record, profile, fault, record["stream"], bool(options.get("include_usage")), record["model"])
        rng = random.Random(f"{self.seed}:{agent}:{index}")  # str seeds are stable across runs
        content = self._content(plan, rng, rf_type, schema, scripted if has_script else None, has_script)
        if fault == "truncated_json":
            content, plan.finish_reason = content[: len(content) // 2], "length"
        plan.pieces = token_pieces(content)
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        if isinstance(limit, int) and 0 < limit < len(plan.pieces):
            plan.pieces, plan.finish_reason = plan.pieces[:limit], "length"
        self._schedule(plan, random.Random(f"{self.seed}:{agent}:{index}:timing"))
        return plan

    @staticmethod
    def _content(
        plan: _Plan, rng: random.Random, rf_type: str | None, schema: Any, scripted: Any, has_script: bool
    ) -> str:
        if plan.fault == "invalid_json":
            return rng.choice(_INVALID_JSON)
        if has_script:
            return scripted if isinstance(scripted, str) else json.dumps(scripted, ensure_ascii=False)
        nonsense = plan.fault == "nonsense"
        if schema is not None:
            return json.dumps(SchemaFaker(schema, rng, nonsense=nonsense).generate(), ensure_ascii=False)
        if rf_type == "json_object":
            return json.dumps({"ok": True, "note": free_text(rng, 5, nonsense=nonsense)})
        return free_text(rng, plan.profile.output_tokens, nonsense=nonsense)

    @staticmethod
    def _schedule(plan: _Plan, rng: random.Random) -> None:
        profile = plan.profile
        rate = profile.slow_tokens_per_s if plan.fault == "slow_stream" else profile.tokens_per_s
        gap = 1.0 / rate if rate > 0 else 0.0

        def jittered(delay: float) -> float:
            return delay * (1 + rng.uniform(-profile.jitter, profile.jitter)) if profile.jitter else delay

        at = jittered(profile.ttft_ms / 1000)
        for _ in plan.pieces:
            plan.offsets.append(at)
            at += jittered(gap)
        plan.total_s = at if plan.pieces else jittered(profile.ttft_ms / 1000)


# --- ASGI app --------------------------------------------------------------


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    return JSONResponse(body, status_code=status, headers=headers)


async def _wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class _GuardedResponse(Response):
    """Runs ``body(send)`` but cancels it as soon as the client disconnects.

    Watching ``receive`` matters while we sleep (ttft, timeout, hang): without
    it a gone client would only be noticed on the next write, or never.
    """

    def __init__(self, body: Callable[[Send], Awaitable[None]], on_disconnect: Callable[[], None]) -> None:
        super().__init__()
        self._body, self._on_disconnect = body, on_disconnect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        work = asyncio.ensure_future(self._body(send))
        watch = asyncio.ensure_future(_wait_for_disconnect(receive))
        try:
            done, _ = await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # uvicorn cancels requests still running at shutdown (a hung stream): end quietly,
            # it closes the connection; re-raising would only log a traceback.
            self._on_disconnect()
            return
        finally:
            watch.cancel()
            if not work.done():
                work.cancel()
        if work in done:
            work.result()
            return
        self._on_disconnect()
        with suppress(asyncio.CancelledError):
            await work


def _sse(payload: Any) -> dict[str, Any]:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return {"type": "http.response.body", "body": f"data: {data}\n\n".encode(), "more_body": True}


def _usage(plan: _Plan) -> dict[str, int]:
    prompt, completion = plan.record["prompt_tokens"], plan.record["completion_tokens"]
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def _sleep_until(loop: asyncio.AbstractEventLoop, deadline: float) -> None:
    # Absolute deadlines keep long streams from drifting.
    await asyncio.sleep(max(0.0, deadline - loop.time()))


async def _run_stream(plan: _Plan, send: Send) -> None:
    rec, loop = plan.record, asyncio.get_running_loop()
    if plan.fault == "timeout":
        await asyncio.sleep(plan.profile.delay_s)  # before any byte
    headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
    rec["status"] = 200  # records are updated before each send: the client may read them at once
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    base = {"id": rec["id"], "object": "chat.completion.chunk", "created": int(time.time()), "model": plan.model}

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**base, "choices": [choice], **extra}

    await send(_sse(chunk({"role": "assistant", "content": ""})))
    if plan.fault == "hang":
        await asyncio.sleep(plan.profile.delay_s)  # until the client gives up
    start = loop.time()
    for i, piece in enumerate(plan.pieces):
        await _sleep_until(loop, start + plan.offsets[i])
        now = time.time()
        rec["first_token_at"] = rec["first_token_at"] or now
        if len(rec["chunk_times"]) < MAX_CHUNK_TIMES:
            rec["chunk_times"].append(now)
        rec["completion_tokens"] = i + 1
        if plan.fault == "drop" and i + 1 >= plan.profile.drop_after_tokens:
            rec["finished_at"] = now
        await send(_sse(chunk({"content": piece}, sim_emitted_at=now)))
        if rec["finished_at"]:
            break
    if plan.fault == "drop":
        rec["finished_at"] = rec["finished_at"] or time.time()
        return  # no terminating chunk: uvicorn closes the connection mid-body
    if not plan.pieces:
        await _sleep_until(loop, start + plan.total_s)
    rec["first_token_at"] = rec["first_token_at"] or time.time()
    rec["finish_reason"], rec["finished_at"] = plan.finish_reason, time.time()
    await send(_sse(chunk({}, plan.finish_reason)))
    if plan.include_usage:
        await send(_sse({**base, "choices": [], "usage": _usage(plan)}))
    await send(_sse("[DONE]"))
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _run_complete(plan: _Plan, send: Send) -> None:
    rec, loop = plan.record, asyncio.get_running_loop()
    if plan.fault in ("timeout", "hang"):
        await asyncio.sleep(plan.profile.delay_s)
    start = loop.time()
    await _sleep_until(loop, start + (plan.offsets[0] if plan.offsets else plan.total_s))
    rec["first_token_at"] = time.time()
    await _sleep_until(loop, start + plan.total_s)
    rec["completion_tokens"] = len(plan.pieces)
    message = {"role": "assistant", "content": "".join(plan.pieces)}
    body = json.dumps(
        {
            "id": rec["id"],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": plan.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": plan.finish_reason}],
            "usage": _usage(plan),
        },
        ensure_ascii=False,
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    rec["status"], rec["finished_at"] = 200, time.time()
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    if plan.fault == "drop":  # promise the full length, send half, then the server closes
        await send({"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True})
        return
    rec["finish_reason"] = plan.finish_reason
    await send({"type": "http.response.body", "body": body, "more_body": False})


_HTTP_FAULTS: dict[str, tuple[int, str, dict[str, str] | None]] = {
    "http_500": (500, "server_error", None),
    "http_429": (429, "rate_limit_exceeded", {"retry-after": "0"}),
    "http_400": (400, "invalid_request_error", None),
}


async def _json_body(request: Request) -> dict[str, Any] | None:
    try:
        body = await request.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def create_app(state: SimulatorState) -> Starlette:
    """The Starlette app; all behaviour lives in ``state``."""

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def models(request: Request) -> Response:
        model = {"id": state.model, "object": "model", "created": 0, "owned_by": "simulator"}
        return JSONResponse({"object": "list", "data": [model]})

    async def chat(request: Request) -> Response:
        received_at = time.time()
        body = await _json_body(request)
        if body is None or not isinstance(body.get("messages"), list):
            return _error(400, "body must be a JSON object with a 'messages' list", "invalid_request_error")
        agent = request.headers.get("x-coaching-agent") or "default"
        state.request_started()
        try:
            plan = state.plan_call(agent, request.headers.get("x-coaching-turn"), body, received_at)
        except BaseException:
            state.request_ended()
            raise
        rec = plan.record
        if plan.fault in _HTTP_FAULTS:
            state.request_ended()
            status, kind, headers = _HTTP_FAULTS[plan.fault]
            rec["status"], rec["finished_at"] = status, time.time()
            return _error(status, f"simulated {plan.fault} for agent {agent}", kind, headers)

        def on_disconnect() -> None:
            rec["cancelled"], rec["finished_at"] = True, time.time()

        async def run(send: Send) -> None:
            try:
                await (_run_stream(plan, send) if plan.stream else _run_complete(plan, send))
            finally:
                state.request_ended()

        return _GuardedResponse(run, on_disconnect)

    async def tokenize_llama(request: Request) -> Response:
        body = await _json_body(request) or {}
        if "content" in body:  # llama.cpp server
            return JSONResponse({"tokens": tokenize(str(body["content"]))})
        if isinstance(body.get("messages"), list):  # vLLM chat form
            tokens = tokenize(messages_to_text(body["messages"]))
        else:  # vLLM completion form
            tokens = tokenize(str(body.get("prompt", "")))
        return JSONResponse({"tokens": tokens, "count": len(tokens), "max_model_len": MAX_MODEL_LEN})

    async def tokenize_extras(request: Request) -> Response:
        body = await _json_body(request) or {}  # llama-cpp-python server
        tokens = tokenize(str(body.get("input", "")))
        if request.url.path.endswith("/count"):
            return JSONResponse({"count": len(tokens)})
        return JSONResponse({"tokens": tokens})

    async def sim_config(request: Request) -> Response:
        if request.method == "GET":
            return JSONResponse(state.config())
        body = await _json_body(request)
        if body is None:
            return _error(400, "body must be a JSON object", "invalid_request_error")
        try:
            return JSONResponse(state.configure(body.get("default"), body.get("agents")))
        except (ValueError, TypeError, AttributeError) as exc:
            return _error(400, str(exc), "invalid_request_error")

    async def sim_reset(request: Request) -> Response:
        state.reset()
        return JSONResponse({"status": "ok"})

    async def sim_calls(request: Request) -> Response:
        return JSONResponse(state.calls(request.query_params.get("agent"), request.query_params.get("turn")))

    async def sim_concurrency(request: Request) -> Response:
        return JSONResponse(state.concurrency())

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/v1/models", models),
            Route("/models", models),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/chat/completions", chat, methods=["POST"]),
            Route("/tokenize", tokenize_llama, methods=["POST"]),
            Route("/extras/tokenize", tokenize_extras, methods=["POST"]),
            Route("/extras/tokenize/count", tokenize_extras, methods=["POST"]),
            Route("/_sim/config", sim_config, methods=["GET", "POST"]),
            Route("/_sim/reset", sim_reset, methods=["POST"]),
            Route("/_sim/calls", sim_calls),
            Route("/_sim/concurrency", sim_concurrency),
        ]
    )


class _DropNoiseFilter(logging.Filter):
    """The "drop" fault ends a response early on purpose; uvicorn logs that as an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "returned without completing response" not in record.getMessage()


def _uvicorn_config(app: Starlette, host: str, port: int, log_level: str, **extra: Any) -> uvicorn.Config:
    error_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _DropNoiseFilter) for f in error_log.filters):
        error_log.addFilter(_DropNoiseFilter())
    # h11 everywhere; a short graceful shutdown so hung streams cannot block stop().
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        http="h11",
        lifespan="off",
        timeout_graceful_shutdown=1,
        **extra,
    )


# --- in-process server, HTTP control client, subprocess helper -------------


class SimulatorServer:
    """The simulator on a background thread: ``with SimulatorServer(port=0) as sim: sim.base_url``."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        model: str = "sim-model",
        seed: int = 0,
        log_level: str = "warning",
        **default_profile: Any,
    ) -> None:
        self.host, self.port = host, port
        self.state = SimulatorState(model=model, seed=seed, **default_profile)
        self.app = create_app(self.state)
        self._log_level = log_level
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"

    def start(self, timeout_s: float = 10.0) -> Self:
        if self._server is not None:
            return self
        # log_config=None: leave the host process's logging setup alone.
        config = _uvicorn_config(self.app, self.host, self.port, self._log_level, log_config=None)
        server = self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=server.run, name="llm-simulator", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"simulator failed to start on {self.host}:{self.port}")
            time.sleep(0.01)
        self.port = server.servers[0].sockets[0].getsockname()[1]  # resolves port=0
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout_s)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self if self._server is not None else self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def configure(
        self, default: Mapping[str, Any] | None = None, agents: Mapping[str, Mapping[str, Any]] | None = None
    ) -> dict[str, Any]:
        return self.state.configure(default, agents)

    def reset(self) -> None:
        self.state.reset()

    def calls(self, agent: str | None = None, turn: str | int | None = None) -> list[dict[str, Any]]:
        return self.state.calls(agent, turn)

    def concurrency(self) -> dict[str, int]:
        return self.state.concurrency()


class SimulatorControl:
    """Steers a simulator in another process; same methods as ``SimulatorServer``."""

    def __init__(self, base_url: str, timeout_s: float = 10.0) -> None:
        root = base_url.rstrip("/")
        self.root_url = root.removesuffix("/v1")
        self._http = httpx.Client(base_url=self.root_url, timeout=timeout_s)

    def health(self) -> bool:
        try:
            return self._http.get("/health").status_code == 200
        except httpx.HTTPError:
            return False

    def configure(
        self, default: Mapping[str, Any] | None = None, agents: Mapping[str, Mapping[str, Any]] | None = None
    ) -> dict[str, Any]:
        response = self._http.post("/_sim/config", json={"default": default or {}, "agents": agents or {}})
        if response.status_code == 400:
            raise ValueError(response.json()["error"]["message"])
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def reset(self) -> None:
        self._http.post("/_sim/reset").raise_for_status()

    def calls(self, agent: str | None = None, turn: str | int | None = None) -> list[dict[str, Any]]:
        params = {k: str(v) for k, v in (("agent", agent), ("turn", turn)) if v is not None}
        response = self._http.get("/_sim/calls", params=params)
        response.raise_for_status()
        result: list[dict[str, Any]] = response.json()
        return result

    def concurrency(self) -> dict[str, int]:
        response = self._http.get("/_sim/concurrency")
        response.raise_for_status()
        result: dict[str, int] = response.json()
        return result

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def start_simulator_process(
    port: int = 0,
    *,
    host: str = "127.0.0.1",
    ttft_ms: float = 200.0,
    tokens_per_s: float = 100.0,
    output_tokens: int = 40,
    seed: int = 0,
    model: str = "sim-model",
    timeout_s: float = 15.0,
) -> tuple[subprocess.Popen[bytes], str]:
    """Run ``python -m agents.llm.simulator`` and wait until /health answers.

    ``port=0`` picks a free port (retrying if another process grabs it first).
    Returns the process and its ``/v1`` base URL; end it with ``stop_simulator_process``.
    """
    path = os.pathsep.join(filter(None, [str(_PROJECT_ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    for _attempt in range(1 if port else 3):
        chosen = port or _free_port(host)
        cmd = [
            sys.executable,
            "-m",
            "agents.llm.simulator",
            "--host",
            host,
            "--port",
            str(chosen),
            "--ttft-ms",
            str(ttft_ms),
            "--tokens-per-s",
            str(tokens_per_s),
            "--output-tokens",
            str(output_tokens),
            "--seed",
            str(seed),
            "--model",
            model,
        ]
        # Our own interpreter and module with numeric/str options: no untrusted input.
        proc = subprocess.Popen(cmd, cwd=_PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL)  # noqa: S603
        root, deadline = f"http://{host}:{chosen}", time.monotonic() + timeout_s
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(root + "/health", timeout=0.5).status_code == 200:
                    return proc, root + "/v1"
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        stop_simulator_process(proc)
    raise RuntimeError(f"simulator process did not become healthy on {host}:{port or 'a free port'}")


def stop_simulator_process(proc: subprocess.Popen[bytes], timeout_s: float = 5.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout_s)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Simulated OpenAI-compatible LLM server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--ttft-ms", type=float, default=200.0)
    parser.add_argument("--tokens-per-s", type=float, default=100.0)
    parser.add_argument("--output-tokens", type=int, default=40)
    parser.add_argument("--jitter", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="sim-model")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    state = SimulatorState(
        model=args.model,
        seed=args.seed,
        ttft_ms=args.ttft_ms,
        tokens_per_s=args.tokens_per_s,
        output_tokens=args.output_tokens,
        jitter=args.jitter,
    )
    print(f"LLM simulator on http://{args.host}:{args.port}/v1", file=sys.stderr, flush=True)
    uvicorn.Server(_uvicorn_config(create_app(state), args.host, args.port, args.log_level)).run()


if __name__ == "__main__":
    main()
