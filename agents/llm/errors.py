"""What can go wrong when calling a model, sorted by what the caller should do about it."""


class LLMError(Exception):
    """Base class. `code` is a stable short string for events and AgentRun.error."""

    code = "llm_error"


class LLMTransientError(LLMError):
    """Timeouts, connection failures, 429 and 5xx: worth retrying with backoff."""

    code = "llm_unavailable"


class LLMPermanentError(LLMError):
    """400/401/404 or a misconfigured endpoint: retrying cannot help."""

    code = "llm_misconfigured"


class LLMOutputError(LLMError):
    """The model answered, but not with what was asked (invalid JSON, schema, truncation)."""

    code = "llm_bad_output"

    def __init__(self, message: str, *, raw: str = "", errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.raw = raw
        self.errors = errors or [message]


class LLMRequestsDisabled(LLMPermanentError):
    """Raised when COACHING_LLM_ALLOW_REQUESTS is off (unit tests)."""

    code = "llm_disabled"


class LLMCircuitOpen(LLMTransientError):
    """The endpoint's circuit breaker is open: the call was not made.

    Transient (the endpoint may recover), but retrying at once only meets the same open
    breaker, so `call_with_retries` gives up on it immediately.
    """

    code = "llm_circuit_open"

    def __init__(self, endpoint: str, *, retry_after_s: float = 0.0) -> None:
        super().__init__(f"endpoint {endpoint} is failing; calls are paused for {retry_after_s:.0f} s")
        self.endpoint = endpoint
        self.retry_after_s = retry_after_s
