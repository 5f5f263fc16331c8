"""Names the review pages share: agents' labels and order, moves by name, runs, short excerpts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from agents.models import Agent, AgentRun, CoachingMove

AGENT_ORDER = [a.value for a in Agent]
AGENT_LABELS: dict[str, str] = {a.value: str(a.label) for a in Agent}
EXCERPT_CHARS = 140


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class MoveName:
    key: str
    name: str
    known: bool

    def __str__(self) -> str:
        return self.name if self.known else self.key


def move_catalog() -> dict[str, str]:
    """Every move's key → name, inactive ones included (old turns used them)."""
    return dict(CoachingMove.objects.values_list("key", "name"))


def moves_named(keys: Iterable[str], catalog: dict[str, str]) -> list[MoveName]:
    return [MoveName(key, catalog.get(key, key), key in catalog) for key in keys]


def run_sort_key(run: AgentRun) -> tuple[datetime, int, int]:
    order = AGENT_ORDER.index(run.agent) if run.agent in AGENT_ORDER else len(AGENT_ORDER)
    return (run.started_at, order, run.round)


def run_label(run: AgentRun) -> str:
    label = AGENT_LABELS.get(run.agent, run.agent)
    return f"{label} (round {run.round})" if run.round > 1 else label
