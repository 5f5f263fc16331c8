"""Real-engine A/B of the shared prefix's order: Coach's prompt processing on each turn of one
session, with the server's prefix cache holding the previous turn's prompt.

Order A puts the memory (pinned facts, blackboard), which changes on most turns, before the
conversation (the order until 2026-12-05); order B after it (memory/context.py now). Each order
runs under its own cache_salt, twice, alternating, so neither warms the other's cache. The ten
coachee messages are the engine trial's browser turns; the replies and blackboard writes between
them are fixed. A request with max_tokens=1 times the prompt's processing (the first token).

    python -m benchmarks.prefix_order_ab http://127.0.0.1:PORT/v1   # a vLLM serving the embedded model

It writes one coachee and session into the configured database (use a scratch one).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import django
import httpx

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coaching_site.settings")
django.setup()

from django.contrib.auth import get_user_model  # noqa: E402

from agents.llm.embedded import MODEL_ALIAS  # noqa: E402
from agents.memory import context  # noqa: E402
from agents.models import BlackboardVersion, Message, Role, Turn, TurnStatus  # noqa: E402
from agents.roles import turn_setup  # noqa: E402
from agents.turns import accept, event_log, sessions  # noqa: E402

BROWSER_TURNS = Path(__file__).parent / "data" / "browser_turns.json"
BUDGET = 2400
COACH_REPLY = (
    "That sounds like a real step. What made it work last night, and what would make it easier to "
    "repeat tomorrow? Keep it small: one change you can do even on a busy day."
)
SYNTH_REPLY = (
    "Here is what I notice: you already changed one thing and it helped a little. The hard part is the "
    "first minutes in bed, when work thoughts start. A short list before bed gives those thoughts a "
    "place to go. Try it three nights this week and tell me what you notice, without judging the "
    "nights it does not work."
)


def prompts_in_both_orders() -> tuple[list[str], list[str]]:
    """Each turn's shared prefix as built now (B) and with its memory moved to the front (A)."""
    user = get_user_model().objects.create_user(username=f"prefix-ab-{int(time.time())}")
    session = sessions.session_start(user_id=user.pk)
    order_a: list[str] = []
    order_b: list[str] = []
    for k, text in enumerate(json.loads(BROWSER_TURNS.read_text())["turns"]):
        result = accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id=f"ab-{k}", text=text)
        turn = Turn.objects.select_related("session__coachee", "user_message", "context_blackboard").get(
            pk=result.turn_id
        )
        now = context.build_shared_context(turn, budget=BUDGET).text
        board = turn.context_blackboard.data if turn.context_blackboard else None
        opening = context.shared_opening(turn.session)
        memory = context.shared_memory(board, context.load_sources(turn), today=turn.started_at.date())
        assert now.startswith(opening)
        assert now.endswith("\n\n" + memory)
        order_a.append(opening + "\n\n" + memory + now[len(opening) : len(now) - len(memory) - 2])
        order_b.append(now)
        for role, reply in ((Role.COACH, COACH_REPLY), (Role.SYNTH, SYNTH_REPLY)):
            Message.objects.create(session=session, seq=event_log.next_seq(session.pk), role=role, text=reply)
        Turn.objects.filter(pk=turn.pk).update(status=TurnStatus.DONE)
        goals = [
            {"text": f"lights out by 23:{i:02d}", "count": k + 1, "last_seen": f"2026-12-0{1 + i % 4}"}
            for i in range(min(k + 1, 4))
        ]
        BlackboardVersion.objects.create(coachee=user, version=k + 1, data={"stated_goals": goals})
    return order_a, order_b


def first_token_s(base_url: str, prefix: str, instructions: str, salt: str) -> tuple[float, int]:
    body = {
        "model": MODEL_ALIAS,
        "max_tokens": 1,
        "temperature": 0,
        "cache_salt": salt,
        "messages": [{"role": "system", "content": prefix}, {"role": "user", "content": instructions}],
    }
    started = time.perf_counter()
    answer = httpx.post(base_url + "/chat/completions", json=body, timeout=300).raise_for_status().json()
    return time.perf_counter() - started, int(answer["usage"]["prompt_tokens"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base_url", help="the vLLM server's /v1 URL")
    args = parser.parse_args()
    instructions = turn_setup.setup_load().prompts["coach"].body.replace("{blocked_moves}", "none")
    order_a, order_b = prompts_in_both_orders()
    orders = [("A: memory first (before)", order_a), ("B: memory last (now)", order_b)]
    later_turns: dict[str, list[float]] = {}
    for round_ in (1, 2):
        salt = f"{time.time():.0f}-{round_}"
        for name, prompts in orders if round_ == 1 else orders[::-1]:
            rows = [first_token_s(args.base_url, p, instructions, f"{name[0]}-{salt}") for p in prompts]
            later_turns.setdefault(name, []).extend(s for s, _ in rows[1:])
            print(f"round {round_} {name}: " + ", ".join(f"{s:.2f} s/{n} tokens" for s, n in rows), flush=True)
    for name, seconds in later_turns.items():
        print(
            f"{name}: turns 2-{len(order_a)} of both rounds: "
            f"p50 {statistics.median(seconds):.2f} s, mean {statistics.mean(seconds):.2f} s"
        )


if __name__ == "__main__":
    main()
