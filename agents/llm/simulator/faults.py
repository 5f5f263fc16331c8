"""The faults a profile can inject, and the canned answers some of them give.

Which calls get a fault is decided in state.py (``fault_times`` budgets); the stalls, slow
streams and dropped connections are played out in responses.py, the HTTP errors in app.py.
"""

from __future__ import annotations

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
SCRIPT_FAULTS = frozenset({None, "truncated_json", "slow_stream"})
# What "invalid_json" answers with.
INVALID_JSON = ('{"oops": ', "Sure! Here is the JSON you asked for: {", "I cannot answer that in JSON.")
# The faults answered with an HTTP error instead of a completion: (status, error type, headers).
HTTP_FAULTS: dict[str, tuple[int, str, dict[str, str] | None]] = {
    "http_500": (500, "server_error", None),
    "http_429": (429, "rate_limit_exceeded", {"retry-after": "0"}),
    "http_400": (400, "invalid_request_error", None),
}
