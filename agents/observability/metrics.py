"""Prometheus metrics of the app's own work: agents, model endpoints, turns, sockets, tasks.

Multiprocess mode (prometheus_client, PROMETHEUS_MULTIPROC_DIR), not a port per process:
Daphne and every Celery worker of a host write their samples to files in one directory and
one scrape adds them up, so Prometheus needs one target per host however many processes a
supervisor starts or restarts (a port per process would need every port known in advance,
and a restarted worker's counters would vanish with it). Gauges are summed over live
processes (`livesum`); each process marks itself dead on a clean exit (setup()).

Every recorder returns at once when COACHING_METRICS is off. Labels take only agent names,
endpoint names and fixed outcome, check or code names: never an id or any text.
"""

from __future__ import annotations

import atexit
import functools
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from django.conf import settings
from prometheus_client import Counter, Gauge, Histogram

if TYPE_CHECKING:
    from agents.models import AgentRun

# Seconds. Model calls: tens of ms (a simulator, a warm prefix) to minutes (a 235B model on
# a long prompt); the turn's deadline is 180 s by default.
CALL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 300.0)
# Time to first token: what the coachee feels; 10 ms (warm prefix) to 30 s (a cold long prompt).
TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
# A whole turn: 1 s on the simulator, 40-110 s on the write-ups' GPUs, the deadline at most.
TURN_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0)
TASK_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 180.0, 600.0)

# What an agent run came to (AgentRun rows say the same: run_outcome).
SUCCEEDED, REPAIRED, INVALID, TIMED_OUT, CIRCUIT_OPEN, FAILED = (
    "succeeded",
    "repaired",
    "invalid",
    "timed_out",
    "circuit_open",
    "failed",
)
OUTCOMES = (SUCCEEDED, REPAIRED, INVALID, TIMED_OUT, CIRCUIT_OPEN, FAILED)
# The words llm.client and the pipeline put in a timed-out call's error (llm_unavailable covers
# unreachable servers and 5xx as well).
TIMEOUT_MARKS = ("timed out", "no time left", "too slowly")
OTHER = "other"  # any agent or label value outside the known set

LLM_REQUEST_SECONDS = Histogram(
    "coaching_llm_request_seconds",
    "One model request from send to last token, by agent, endpoint and result (ok, error, circuit_open, cancelled).",
    ["agent", "endpoint", "result"],
    buckets=CALL_BUCKETS,
)
LLM_TTFT_SECONDS = Histogram(
    "coaching_llm_time_to_first_token_seconds",
    "Streamed model requests (Coach): from send to the first content token.",
    ["agent", "endpoint"],
    buckets=TTFT_BUCKETS,
)
LLM_IN_FLIGHT = Gauge(
    "coaching_llm_requests_in_flight",
    "Model requests sent and not finished, per endpoint (all processes of the host).",
    ["endpoint"],
    multiprocess_mode="livesum",
)
AGENT_RUNS = Counter(
    "coaching_agent_runs",
    "Agent runs by outcome: succeeded, repaired (valid after the repair call), invalid, timed_out, "
    "circuit_open, failed.",
    ["agent", "endpoint", "outcome"],
)
AGENT_RUN_SECONDS = Histogram(
    "coaching_agent_run_seconds",
    "One agent run, retries and repair included.",
    ["agent", "endpoint"],
    buckets=CALL_BUCKETS,
)
AGENT_TOKENS = Counter(
    "coaching_agent_tokens",
    "Tokens of agent runs as recorded on their AgentRun (kind: prompt or completion).",
    ["agent", "endpoint", "kind"],
)
AGENT_RETRIES = Counter(
    "coaching_agent_retries",
    "Model calls repeated after a transient error (timeouts, 429, 5xx), per agent and endpoint.",
    ["agent", "endpoint"],
)
TURN_FIRST_TOKEN_SECONDS = Histogram(
    "coaching_turn_first_token_seconds",
    "From the coachee's message being accepted to Coach's first token.",
    buckets=TTFT_BUCKETS,
)
TURN_ANSWER_SECONDS = Histogram(
    "coaching_turn_full_answer_seconds",
    "From the coachee's message being accepted to the full (Synth or fallback) answer.",
    buckets=TURN_BUCKETS,
)
TURNS_FINISHED = Counter(
    "coaching_turns_finished",
    "Turns that delivered their full answer, by degraded, fallback and flagged.",
    ["degraded", "fallback", "flagged"],
)
QUALITY_FINDINGS = Counter(
    "coaching_quality_findings",
    "Quality-gate hits by surface (coach, synth, blackboard), check and what was done.",
    ["surface", "check", "action"],
)
CRISIS_HITS = Counter(
    "coaching_crisis_hits",
    "Crisis pre-gate hits by detector layer (pattern, classifier), category and level.",
    ["layer", "category", "level"],
)
CRISIS_DISMISSALS = Counter(
    "coaching_crisis_dismissals",
    "Crisis cards and refer or crisis escalations a coach found a false alarm, by the layer that raised them"
    " (the pre-gate's pattern or classifier, or the turn's agents): the false alarms of real use.",
    ["layer", "category"],
)
CONTROL_TOKENS = Counter(
    "coaching_control_tokens",
    "Coachee messages that carried chat-template control tokens (neutralised before any model read them).",
)
STEERING_FLAGS = Counter(
    "coaching_steering_flags",
    "Coachee messages that read as an attempt to steer the agents (prompt injection), flagged for review.",
)
WS_OPEN = Gauge(
    "coaching_ws_connections_open",
    "Chat WebSockets accepted and not closed (all Daphne processes of the host).",
    multiprocess_mode="livesum",
)
WS_CONNECTS = Counter(
    "coaching_ws_connects",
    "Chat WebSocket connection attempts by result (accepted, or the close code of a refusal).",
    ["result"],
)
WS_FRAMES_REFUSED = Counter(
    "coaching_ws_frames_refused",
    "Client frames answered with an error instead of being acted on, by error code.",
    ["code"],
)
WS_RESUMES = Counter("coaching_ws_resumes", "Resume frames answered (a client reconnecting).")
WS_REPLAYED_EVENTS = Counter("coaching_ws_replayed_events", "Persisted events sent again on resume.")
TASK_SECONDS = Histogram(
    "coaching_celery_task_seconds",
    "Celery tasks of this app, by task name and final state.",
    ["task", "state"],
    buckets=TASK_BUCKETS,
)

# Fixed label values: anything else is recorded as OTHER, so no caller can make a label from data.
QUALITY_SURFACES = frozenset({"coach", "synth", "blackboard"})
QUALITY_ACTIONS = frozenset({"regenerated", "fallback", "withdrawn", "withheld", "refused"})
CRISIS_LAYERS = frozenset({"pattern", "classifier"})
# A dismissed alarm raised after accept, by the turn's agents (Stability's risk, through arbitration).
AGENTS_LAYER = "agents"
DISMISSAL_LAYERS = CRISIS_LAYERS | {AGENTS_LAYER}
TASK_STATES = frozenset({"SUCCESS", "FAILURE", "RETRY", "REVOKED"})


def enabled() -> bool:
    return bool(settings.COACHING_METRICS)


@functools.cache
def _agents() -> frozenset[str]:
    from agents.models import Agent  # not at import: the llm client imports this module

    return frozenset(Agent.values)


@functools.cache
def _enum_values(name: str) -> frozenset[str]:
    from agents import models

    if name == "category":
        return frozenset(models.CrisisCategory.values)
    if name == "level":
        return frozenset(models.Escalation.values)
    raise KeyError(name)


def agent_label(value: object) -> str:
    return value if isinstance(value, str) and value in _agents() else OTHER


def _one_of(value: object, allowed: Iterable[str]) -> str:
    return value if isinstance(value, str) and value in allowed else OTHER


def _code(value: str) -> str:
    # Check names and error codes are constants in the code (quality.Finding.check, the
    # consumer's error frames): short snake_case words. Anything else is not one of them.
    return value if 0 < len(value) <= 32 and value.replace("_", "").isalpha() and value.islower() else OTHER


def endpoint_label(name: object) -> str:
    # Endpoint names are slugs an operator chose (ModelEndpoint.name): never personal data.
    return name if isinstance(name, str) and name else OTHER


def run_outcome(*, status: str, error: str, validation_errors: Sequence[object]) -> str | None:
    """What a finished AgentRun came to; None while it runs. The admin's operator page uses
    the same sorting, so its figures and the metrics agree."""
    if status == "running":
        return None
    if status == "succeeded":
        return REPAIRED if validation_errors else SUCCEEDED
    code = error.split(":", 1)[0]
    if code == "llm_circuit_open":
        return CIRCUIT_OPEN
    if code == "llm_bad_output":
        return INVALID
    if code == "llm_unavailable" and any(mark in error for mark in TIMEOUT_MARKS):
        return TIMED_OUT
    return FAILED


def retries_of(*, attempts: int, validation_errors: Sequence[object]) -> int:
    """Calls beyond the first that were not the repair call (made once, after invalid output)."""
    return max(0, attempts - 1 - (1 if validation_errors else 0))


# --- Recorders: one line at each call site ------------------------------------------------


def agent_run_recorded(run: AgentRun, *, endpoint: str | None = None) -> None:
    """A JSON agent's run has ended and been saved (pipeline)."""
    if not enabled():
        return
    agent_run_ended(
        agent=run.agent,
        endpoint=endpoint if endpoint is not None else (run.endpoint.name if run.endpoint is not None else ""),
        status=run.status,
        error=run.error,
        validation_errors=run.validation_errors,
        attempts=run.attempts,
        latency_ms=run.latency_ms,
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
    )


def agent_run_ended(
    *,
    agent: str,
    endpoint: str,
    status: str,
    error: str,
    validation_errors: Sequence[object],
    attempts: int,
    latency_ms: int | None,
    prompt_tokens: int | None,
    completion_tokens: int | None,
) -> None:
    if not enabled():
        return
    outcome = run_outcome(status=status, error=error, validation_errors=validation_errors)
    if outcome is None:
        return
    labels = (agent_label(agent), endpoint_label(endpoint))
    AGENT_RUNS.labels(*labels, outcome).inc()
    if latency_ms is not None:
        AGENT_RUN_SECONDS.labels(*labels).observe(latency_ms / 1000)
    if prompt_tokens:
        AGENT_TOKENS.labels(*labels, "prompt").inc(prompt_tokens)
    if completion_tokens:
        AGENT_TOKENS.labels(*labels, "completion").inc(completion_tokens)
    retries = retries_of(attempts=attempts, validation_errors=validation_errors)
    if retries:
        AGENT_RETRIES.labels(*labels).inc(retries)


def coach_ended(
    *,
    endpoint: str,
    status: str,
    error: str,
    latency_ms: int,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    turn_started_at: float,
    first_token_at: float | None,
) -> None:
    """Coach's reply ended and its run was saved (coach.coach_end)."""
    if not enabled():
        return
    agent_run_ended(
        agent="coach",
        endpoint=endpoint,
        status=status,
        error=error,
        validation_errors=(),
        attempts=1,
        latency_ms=latency_ms,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
    )
    if first_token_at is not None:
        # Clocks of two processes: never a negative duration.
        TURN_FIRST_TOKEN_SECONDS.observe(max(0.0, first_token_at - turn_started_at))


def turn_finished(*, started_at: float, finished_at: float, degraded: bool, fallback: bool, flagged: bool) -> None:
    """The turn's full answer was delivered (turns.finish.turn_finish, after the commit)."""
    if not enabled():
        return
    TURN_ANSWER_SECONDS.observe(max(0.0, finished_at - started_at))
    TURNS_FINISHED.labels(_yes_no(degraded), _yes_no(fallback), _yes_no(flagged)).inc()


def _yes_no(value: bool) -> str:
    return "true" if value else "false"


def quality_findings(*, surface: str, checks: Iterable[str], action: str) -> None:
    if not enabled():
        return
    for check in checks:
        QUALITY_FINDINGS.labels(
            _one_of(surface, QUALITY_SURFACES), _code(check), _one_of(action, QUALITY_ACTIONS)
        ).inc()


def control_tokens_carried() -> None:
    if enabled():
        CONTROL_TOKENS.inc()


def steering_flagged() -> None:
    if enabled():
        STEERING_FLAGS.inc()


def crisis_hit(*, layer: str, category: str, level: str) -> None:
    if not enabled():
        return
    category_label = _one_of(category, _enum_values("category"))
    CRISIS_HITS.labels(_one_of(layer, CRISIS_LAYERS), category_label, _one_of(level, _enum_values("level"))).inc()


def crisis_dismissed(*, layer: str, category: str) -> None:
    if enabled():
        CRISIS_DISMISSALS.labels(_one_of(layer, DISMISSAL_LAYERS), _one_of(category, _enum_values("category"))).inc()


def ws_connected() -> None:
    if not enabled():
        return
    WS_CONNECTS.labels("accepted").inc()
    WS_OPEN.inc()


def ws_disconnected() -> None:
    if enabled():
        WS_OPEN.dec()


def ws_refused(code: int) -> None:
    if enabled():
        WS_CONNECTS.labels(str(int(code))).inc()


def ws_frame_refused(code: str) -> None:
    if enabled():
        WS_FRAMES_REFUSED.labels(_code(code)).inc()


def ws_resumed(*, events: int) -> None:
    if not enabled():
        return
    WS_RESUMES.inc()
    if events:
        WS_REPLAYED_EVENTS.inc(events)


def task_finished(*, task: str, state: str, seconds: float) -> None:
    if enabled() and task.startswith("coaching."):
        TASK_SECONDS.labels(task, _one_of(state, TASK_STATES)).observe(seconds)


def setup() -> None:
    """Once per process (AgentsConfig.ready): in multiprocess mode, this process's live gauges
    leave the sums when it exits cleanly (a killed one's stay until the directory is emptied
    at the next start, which the run script does)."""
    if not enabled() or not settings.PROMETHEUS_MULTIPROC_DIR:
        return
    from prometheus_client import multiprocess

    atexit.register(multiprocess.mark_process_dead, os.getpid())
