"""The simulator's state: config, scripts, fault budgets and the call log, and each call's plan."""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import threading
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from agents.llm.simulator.faker import SchemaFaker, free_text, response_schema
from agents.llm.simulator.faults import INVALID_JSON, SCRIPT_FAULTS
from agents.llm.simulator.profiles import Profile, validate_profile
from agents.llm.simulator.tokens import messages_sha, messages_to_text, token_pieces


@dataclasses.dataclass
class Plan:
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
        self._startup = validate_profile(default_profile)
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
        new_default = validate_profile(default or {})
        new_agents = {str(name): validate_profile(p) for name, p in (agents or {}).items()}
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

    def plan_call(self, agent: str, turn: str | None, body: dict[str, Any], received_at: float) -> Plan:
        messages = body.get("messages") or []
        rf_type, schema = response_schema(body.get("response_format"))
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
            has_script = fault in SCRIPT_FAULTS and bool(profile.script)
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
        plan = Plan(record, profile, fault, record["stream"], bool(options.get("include_usage")), record["model"])
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
        plan: Plan, rng: random.Random, rf_type: str | None, schema: Any, scripted: Any, has_script: bool
    ) -> str:
        if plan.fault == "invalid_json":
            return rng.choice(INVALID_JSON)
        if has_script:
            return scripted if isinstance(scripted, str) else json.dumps(scripted, ensure_ascii=False)
        nonsense = plan.fault == "nonsense"
        if schema is not None:
            return json.dumps(SchemaFaker(schema, rng, nonsense=nonsense).generate(), ensure_ascii=False)
        if rf_type == "json_object":
            return json.dumps({"ok": True, "note": free_text(rng, 5, nonsense=nonsense)})
        return free_text(rng, plan.profile.output_tokens, nonsense=nonsense)

    @staticmethod
    def _schedule(plan: Plan, rng: random.Random) -> None:
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
