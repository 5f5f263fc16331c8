"""Print prompt tokens per turn for coachees with 1, 10 and 50 earlier sessions.

Everything happens in a transaction that is rolled back: synthetic coachees (agents/synthetic.py)
are created, every agent is pointed at an in-process simulated model server (whose tokenizer
also counts the tokens), one whole turn runs through the pipeline's steps, and what each
AgentRun recorded is printed beside the agent's budget. Nothing is left in the database.

    python manage.py context_figure [--sessions 1,10,50] [--history 30] [--json]
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from agents.llm.simulator.server import SimulatorServer
from agents.models import Agent, AgentConfig, AgentRun, ModelEndpoint
from agents.synthetic import synthetic_coachee, turn_steps_run

# The five calls of a turn that share the prefix (the critic's is a sixth, shown too).
FIGURE_AGENTS = [Agent.SHADOW, Agent.PERSONA, Agent.PLASTICITY, Agent.STABILITY, Agent.SYNTH, Agent.CRITIC]


class _Rollback(Exception):
    pass


def figure_rows(*, sessions: list[int], history: int, base_url: str) -> list[dict[str, Any]]:
    """One row per coachee: the shared prefix, each agent's prompt tokens and budget, the turn total."""
    endpoint = ModelEndpoint.objects.create(
        name="context-figure-sim", kind="vllm", base_url=base_url, model_id="sim-model", read_timeout_s=30
    )
    AgentConfig.objects.update(endpoint=endpoint)
    budgets = dict(AgentConfig.objects.values_list("agent", "context_budget"))
    rows = []
    for n in sessions:
        coachee = synthetic_coachee(username=f"figure-{n}", earlier_sessions=n, history_messages=history)
        turn_steps_run(coachee.turn.pk)
        coachee.turn.refresh_from_db()
        runs = {r.agent: r for r in AgentRun.objects.filter(turn=coachee.turn, round=1)}
        agents = {}
        for agent in FIGURE_AGENTS:
            run = runs.get(agent)
            agents[agent] = {
                "prompt_tokens": run.context_tokens if run else None,
                "server_prompt_tokens": run.prompt_tokens if run else None,
                "shared_tokens": (run.context_dropped or {}).get("shared_tokens") if run else None,
                "budget": budgets.get(agent),
            }
        rows.append(
            {
                "earlier_sessions": n,
                "history_messages": history,
                "shared_prefix_tokens": coachee.turn.shared_tokens,
                "dropped": coachee.turn.shared_dropped,
                "agents": agents,
                "turn_prompt_tokens": sum(a["prompt_tokens"] or 0 for a in agents.values()),
                "within_budgets": all(
                    a["prompt_tokens"] is not None and a["prompt_tokens"] <= (a["budget"] or 0) for a in agents.values()
                ),
            }
        )
    return rows


class Command(BaseCommand):
    help = "Print prompt tokens per turn for synthetic coachees with 1, 10 and 50 earlier sessions (rolled back)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--sessions", default="1,10,50", help="Comma-separated numbers of earlier sessions.")
        parser.add_argument("--history", type=int, default=30, help="Messages in the current session.")
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            sessions = [int(x) for x in options["sessions"].split(",") if x.strip()]
        except ValueError as exc:
            raise CommandError("--sessions takes numbers, e.g. 1,10,50") from exc
        if not settings.COACHING_LLM_ALLOW_REQUESTS:
            raise CommandError("model requests are switched off (COACHING_LLM_ALLOW_REQUESTS)")
        rows: list[dict[str, Any]] = []
        with SimulatorServer(port=0, ttft_ms=0, tokens_per_s=0, output_tokens=20) as sim:
            try:
                with transaction.atomic():
                    rows = figure_rows(sessions=sessions, history=options["history"], base_url=sim.base_url)
                    raise _Rollback
            except _Rollback:
                pass
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        header = ["sessions", "shared", *FIGURE_AGENTS, "turn total", "within budgets"]
        self.stdout.write("Prompt tokens per turn (context builder's count, simulator tokenizer)")
        self.stdout.write(" | ".join(f"{h:>10}" for h in header))
        for row in rows:
            cells = [row["earlier_sessions"], row["shared_prefix_tokens"]]
            cells += [f"{row['agents'][a]['prompt_tokens']}/{row['agents'][a]['budget']}" for a in FIGURE_AGENTS]
            cells += [row["turn_prompt_tokens"], "yes" if row["within_budgets"] else "NO"]
            self.stdout.write(" | ".join(f"{c!s:>10}" for c in cells))
