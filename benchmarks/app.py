"""The benchmark's side of the app's database, through the ORM. Import only after django.setup().

Coachees are real users with real sessions; they log in the way a browser does (a Django
session cookie), only without a password, so setting up 50 of them takes no hashing.
"""

from __future__ import annotations

import io
from collections import Counter
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db.models import Count
from django.test import Client

from agents.models import AgentRun, SessionEvent, Turn
from agents.safety import pregate
from agents.turns.sessions import session_start
from benchmarks.load import Coachee
from benchmarks.metrics import TurnFacts

USER_PREFIX = "bench-"


def migrate() -> None:
    call_command("migrate", interactive=False, verbosity=0)


def point_agents_at(
    name: str, *, kind: str, base_url: str, model: str, max_concurrency: int, read_timeout_s: float = 120.0
) -> None:
    """`manage.py endpoint_configure NAME ... --agents all`, in this process."""
    call_command(
        "endpoint_configure",
        name,
        kind=kind,
        base_url=base_url,
        model=model,
        max_concurrency=max_concurrency,
        read_timeout=read_timeout_s,
        agents="all",
        stdout=io.StringIO(),
    )


def messages_read_as_crisis(messages: tuple[str, ...]) -> list[str]:
    """The bench's messages that the crisis pre-gate answers with the card, alone or after the
    ones a coachee sent before it (they go round in order). Such a turn has no Coach, and its
    coachee's later replies are held until checked: Coach's first token is then not measured."""
    patterns = pregate.active_crisis_patterns()
    read_as_crisis = []
    for index, text in enumerate(messages):
        earlier = [messages[(index - back) % len(messages)] for back in range(1, pregate.HISTORY_MESSAGES + 1)]
        if pregate.assess(text, patterns) is not None or pregate.assess(text, patterns, earlier) is not None:
            read_as_crisis.append(text)
    return read_as_crisis


def make_coachees(label: str, count: int) -> list[Coachee]:
    """`count` new coachees, each logged in with one open session."""
    coachees = []
    for index in range(count):
        user = get_user_model().objects.create_user(username=f"{USER_PREFIX}{label}-{index:03d}")  # no password
        session = session_start(user_id=user.pk)
        client = Client()
        client.force_login(user)
        cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
        coachees.append(Coachee(index=index, session_id=session.pk, cookie=cookie))
    return coachees


def turn_facts(turn_ids: list[int]) -> dict[int, TurnFacts]:
    """Status, persisted events and agent runs of each turn, in three queries."""
    if not turn_ids:
        return {}
    events: Counter[int] = Counter()
    synth_done: Counter[int] = Counter()
    rows = (
        SessionEvent.objects.filter(payload__turn_id__in=turn_ids)
        .values("payload__turn_id", "type")
        .annotate(n=Count("id"))
    )
    for row in rows:
        turn_id = int(row["payload__turn_id"])
        events[turn_id] += row["n"]
        if row["type"] == "synth.done":
            synth_done[turn_id] += row["n"]
    runs: dict[int, list[dict[str, Any]]] = {}
    for run in AgentRun.objects.filter(turn_id__in=turn_ids).order_by("turn_id", "started_at"):
        runs.setdefault(run.turn_id, []).append(run_summary(run))
    return {
        turn.pk: TurnFacts(
            status=turn.status,
            degraded=turn.degraded,
            flagged=turn.flagged,
            persisted_events=events[turn.pk],
            synth_done_events=synth_done[turn.pk],
            runs=runs.get(turn.pk, []),
        )
        for turn in Turn.objects.filter(pk__in=turn_ids)
    }


def run_summary(run: AgentRun) -> dict[str, Any]:
    return {
        "agent": run.agent,
        "round": run.round,
        "status": run.status,
        "attempts": run.attempts,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        "latency_ms": run.latency_ms,
        # Wall clock of the worker or Daphne process, comparable with the simulator's times.
        "started_at": run.started_at.timestamp(),
        "finished_at": run.finished_at.timestamp() if run.finished_at else None,
    }


def turn_runs(turn_id: int) -> list[dict[str, Any]]:
    """Every run of one turn, with why it failed (the real-model turn's table shows it)."""
    runs = AgentRun.objects.filter(turn_id=turn_id).order_by("started_at")
    return [{**run_summary(r), "error": r.error[:120]} for r in runs]


def turn_summary(turn_id: int) -> dict[str, Any]:
    turn = Turn.objects.get(pk=turn_id)
    elapsed = (turn.finished_at - turn.started_at).total_seconds() if turn.finished_at else None
    return {"status": turn.status, "degraded": turn.degraded, "flagged": turn.flagged, "db_elapsed_s": elapsed}
