"""What the steps of one turn share inside one process, so each step does not read it again.

Celery tasks take ids, so every step used to load the same rows: the agents' configurations,
their active prompts and the move catalog (three queries a step), and the trio Shadow's output.
On the turn's critical path the three specialists start at once in one worker process, where
each statement also waits for the others' share of the interpreter: the benchmark measured
their preludes at ~20 ms each, most of it these reads.

- `setup_for(turn_id)`: configurations, active prompts, catalog and crisis patterns, read once
  per turn per process by the first step that needs them (six small queries). A turn runs
  with the setup it started with; an operator's change applies from the next turn (and a step
  in another process reads it anew).
- `output_remember` / `output_for` / `outputs_for`: an agent's validated output, kept by the
  step that produced it once its run is committed (Shadow's for the trio, all four for Synth);
  a step in another process, or one missing an output, reads the database instead.
- `turn_remember` / `running_turn`: the Turn row with its shared prefix built, for the steps that
  only read it (Coach, the trio). Its status is always read fresh: a stopped or expired turn is
  never run from here. Steps that change the turn (Synth) load their own.

Bounded (the most recent turns only) and safe for the worker's threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from agents.models import AgentConfig, CoachingMove, PromptStatus, PromptVersion, Turn, TurnStatus
from agents.roles.arbitration import MoveInfo
from agents.roles.schemas import AgentOutput
from agents.safety import pregate

# Turns kept per process: far more than run at once in one worker.
TURNS_KEPT = 256


@dataclass(frozen=True)
class TurnSetup:
    configs: dict[str, AgentConfig]  # with their endpoints
    prompts: dict[str, PromptVersion]  # the active version of each agent
    catalog: dict[str, MoveInfo]  # the active moves, by key
    crisis_patterns: list[pregate.PatternRow]  # (id, locale, pattern, category) of the active ones

    def config(self, agent: str) -> AgentConfig:
        try:
            return self.configs[agent]
        except KeyError:
            raise AgentConfig.DoesNotExist(f"no configuration for agent {agent}") from None

    def prompt(self, agent: str) -> PromptVersion:
        try:
            return self.prompts[agent]
        except KeyError:
            raise PromptVersion.DoesNotExist(f"no active prompt for agent {agent}") from None


@dataclass
class _Entry:
    setup: TurnSetup | None = None
    outputs: dict[str, AgentOutput] = field(default_factory=dict)
    turn: Turn | None = None


_lock = threading.Lock()
_turns: OrderedDict[int, _Entry] = OrderedDict()


def move_catalog() -> dict[str, MoveInfo]:
    """The active coaching moves, by key."""
    return {
        m.key: MoveInfo(m.key, m.name, m.description, m.pushes)
        for m in CoachingMove.objects.filter(active=True).order_by("key")
    }


def setup_load() -> TurnSetup:
    """Read the setup from the database (six queries)."""
    # With their fallbacks (routing reads them per call).
    configs = {
        c.agent: c for c in AgentConfig.objects.select_related("endpoint").prefetch_related("fallbacks__endpoint")
    }
    prompts = {p.agent: p for p in PromptVersion.objects.filter(status=PromptStatus.ACTIVE)}
    patterns = pregate.active_crisis_patterns()
    # The pre-gate's RE2 set for these patterns, before the message that needs them (the
    # classifier is loaded once at the ASGI process's start: safety.warm_at_startup).
    pregate.warm_patterns(patterns)
    return TurnSetup(configs=configs, prompts=prompts, catalog=move_catalog(), crisis_patterns=patterns)


def _entry(turn_id: int) -> _Entry:
    # Call with the lock held.
    entry = _turns.get(turn_id)
    if entry is None:
        entry = _turns[turn_id] = _Entry()
        while len(_turns) > TURNS_KEPT:
            _turns.popitem(last=False)
    else:
        _turns.move_to_end(turn_id)
    return entry


def setup_for(turn_id: int) -> TurnSetup:
    with _lock:
        setup = _entry(turn_id).setup
    if setup is not None:
        return setup
    # Outside the lock: a second thread may read it too, the first kept wins.
    loaded = setup_load()
    with _lock:
        entry = _entry(turn_id)
        if entry.setup is None:
            entry.setup = loaded
        return entry.setup


def output_remember(turn_id: int, agent: str, output: AgentOutput) -> None:
    with _lock:
        _entry(turn_id).outputs[agent] = output


def outputs_for(turn_id: int) -> dict[str, AgentOutput]:
    with _lock:
        entry = _turns.get(turn_id)
        return dict(entry.outputs) if entry is not None else {}


def output_for(turn_id: int, agent: str) -> AgentOutput | None:
    with _lock:
        entry = _turns.get(turn_id)
        return entry.outputs.get(agent) if entry is not None else None


def turn_remember(turn: Turn, *, setup: TurnSetup | None = None) -> None:
    """Keep a committed turn, loaded with its session, coachee and user message (read-only),
    and, from turn_accept, the setup it starts with."""
    with _lock:
        entry = _entry(turn.pk)
        entry.turn = turn
        if setup is not None and entry.setup is None:
            entry.setup = setup


def running_turn(turn_id: int, load: Callable[[int], Turn]) -> Turn | None:
    """The turn if it is still running: the kept row (one small query for its status) or `load`."""
    with _lock:
        entry = _turns.get(turn_id)
        kept = entry.turn if entry is not None else None
    if kept is None:
        turn = load(turn_id)
        return turn if turn.status == TurnStatus.RUNNING else None
    return kept if Turn.objects.filter(pk=turn_id, status=TurnStatus.RUNNING).exists() else None


def forget(turn_id: int) -> None:
    """The turn has ended: its entry is not needed any more."""
    with _lock:
        _turns.pop(turn_id, None)


def clear() -> None:
    """For tests: start from nothing."""
    with _lock:
        _turns.clear()
