"""Per-agent behaviour profiles: speed and latency (ttft, tokens/s, jitter), the fault to
inject and scripted outputs. Agents' overrides merge over the default profile."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from agents.llm.simulator.faults import FAULTS


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


def validate_profile(raw: Mapping[str, Any]) -> dict[str, Any]:
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
