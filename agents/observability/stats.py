"""The last hour per agent, computed from AgentRun rows: what an operator without Grafana sees
in the admin (works with metrics off). Outcomes are sorted as the metrics sort them."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from agents.models import Agent, AgentRun, RunStatus
from agents.observability import metrics

# The page's window: long enough to hold a few hundred turns, short enough to show "now".
WINDOW = timedelta(hours=1)


@dataclass
class AgentHour:
    agent: str
    label: str
    runs: int = 0
    running: int = 0
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(metrics.OUTCOMES, 0))
    latencies_ms: list[int] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def finished(self) -> int:
        return self.runs - self.running

    @property
    def p50_ms(self) -> int | None:
        return percentile(self.latencies_ms, 50)

    @property
    def p95_ms(self) -> int | None:
        return percentile(self.latencies_ms, 95)

    @property
    def valid_pct(self) -> float | None:
        """Runs that produced usable output (first time or after the repair call)."""
        if not self.finished:
            return None
        return 100 * (self.outcomes[metrics.SUCCEEDED] + self.outcomes[metrics.REPAIRED]) / self.finished

    @property
    def failures(self) -> int:
        return self.finished - self.outcomes[metrics.SUCCEEDED] - self.outcomes[metrics.REPAIRED]


def percentile(values: list[int], pct: float) -> int | None:
    """Nearest-rank percentile (no interpolation: the value some run really took)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def last_hour(*, now: datetime | None = None) -> list[AgentHour]:
    """Every agent that ran in the window, in the turn's order; agents with no run are left out."""
    since = (now or timezone.now()) - WINDOW
    rows = AgentRun.objects.filter(started_at__gte=since).values_list(
        "agent", "status", "error", "validation_errors", "latency_ms", "prompt_tokens", "completion_tokens"
    )
    per_agent: dict[str, AgentHour] = {}
    labels = dict(Agent.choices)
    for agent, status, error, validation_errors, latency_ms, prompt_tokens, completion_tokens in rows.iterator():
        hour = per_agent.setdefault(agent, AgentHour(agent, str(labels.get(agent, agent))))
        hour.runs += 1
        outcome = metrics.run_outcome(status=status, error=error, validation_errors=validation_errors)
        if outcome is None:
            hour.running += 1
            continue
        hour.outcomes[outcome] += 1
        if latency_ms is not None:
            hour.latencies_ms.append(latency_ms)
        hour.prompt_tokens += prompt_tokens or 0
        hour.completion_tokens += completion_tokens or 0
    order = {agent: index for index, agent in enumerate(Agent.values)}
    return sorted(per_agent.values(), key=lambda hour: order.get(hour.agent, len(order)))


def failure_reasons(*, now: datetime | None = None, limit: int = 10) -> list[tuple[str, str, int]]:
    """(agent, error code, count) of the window's failed runs, most frequent first: the code
    only (the text after it may quote a server's message), never a coachee's words."""
    since = (now or timezone.now()) - WINDOW
    counts: dict[tuple[str, str], int] = defaultdict(int)
    failed = AgentRun.objects.filter(started_at__gte=since, status=RunStatus.FAILED).values_list("agent", "error")
    for agent, error in failed.iterator():
        counts[(agent, error.split(":", 1)[0][:40] or "unknown")] += 1
    ranked = sorted(counts.items(), key=lambda item: -item[1])[:limit]
    return [(agent, code, count) for (agent, code), count in ranked]
