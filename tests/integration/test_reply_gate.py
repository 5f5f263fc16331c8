"""The quality gate on what a coachee reads: Synth's reply regenerated once with the failures named,
then an honest fallback in the coachee's language; Coach's reply held where risks are known and
withdrawn when it fails; every finding recorded for the operators."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agents.llm.simulator.server import SimulatorServer
from agents.models import AgentRun, Message, MessageStatus, QualityFinding, Turn
from agents.pipeline import reply_gate
from agents.turns.sessions import session_start
from tests.support.people import make_coachee
from tests.support.stack import ChatClient, LiveStack, login_cookie
from tests.support.turns import CLEAN_CRITIC, GOOD, META_JUNK, synth


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_thread_connections")
async def test_coach_junk_is_withdrawn_and_the_full_answer_stands(live_stack: LiveStack, live_sim: Any) -> None:
    live_sim.configure(
        agents={
            "coach": {"script": [META_JUNK], "repeat_last": True},
            "synth": {"script": [synth(GOOD)], "repeat_last": True},
        }
    )
    user = await sync_to_async(make_coachee)()
    session = await sync_to_async(session_start)(user_id=user.pk)
    cookie = await sync_to_async(login_cookie)("coachee", "pw-for-tests-1")
    async with ChatClient(live_stack, session, cookie) as chat:
        await chat.send({"type": "user.message", "client_id": "j-1", "text": "I keep skipping my evening runs."})
        await chat.until(lambda e: e["type"] == "turn.done", timeout_s=60)
    done = next(e for e in chat.events if e["type"] == "coach.done")
    assert done["status"] == MessageStatus.WITHDRAWN
    assert done["text"] == reply_gate.WITHDRAWN_NOTICE
    assert next(e for e in chat.events if e["type"] == "synth.done")["text"] == GOOD

    def stored() -> tuple[Message | None, AgentRun, Turn, list[str]]:
        turn = Turn.objects.select_related("coach_message").get(session=session)
        run = AgentRun.objects.get(turn=turn, agent="coach")
        checks = list(QualityFinding.objects.filter(turn=turn, surface="coach").values_list("check_name", flat=True))
        return turn.coach_message, run, turn, checks

    message, run, turn, checks = await sync_to_async(stored)()
    assert message is not None
    assert message.status == MessageStatus.WITHDRAWN
    assert message.text == reply_gate.WITHDRAWN_NOTICE
    # Kept for the review: what the model wrote until the live check stopped its stream.
    assert run.raw_output
    assert META_JUNK.startswith(run.raw_output)
    assert turn.flagged
    assert "coach reply withdrawn" in turn.flag_reason
    assert "meta_talk" in checks


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_thread_connections")
async def test_with_a_move_blocked_coach_is_held_until_checked(live_stack: LiveStack, live_sim: Any) -> None:
    reply = "That sounds like a tiring week. What made the evenings hard?"
    coach_config(live_sim, reply)
    _, events = await two_turns(live_stack, "Today I skipped it again.")
    types = [e["type"] for e in events]
    assert "coach.delta" not in types  # nothing streamed unchecked
    done = next(e for e in events if e["type"] == "coach.done")
    assert (done["text"], done["status"]) == (reply, MessageStatus.COMPLETE)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_thread_connections")
async def test_a_held_coach_reply_using_a_blocked_move_never_reaches_the_coachee(
    live_stack: LiveStack, live_sim: Any
) -> None:
    coach_config(live_sim, "No excuses this time: you run tonight, whatever happens.")
    session, events = await two_turns(live_stack, "Today I skipped it again.")
    assert "coach.delta" not in [e["type"] for e in events]
    done = next(e for e in events if e["type"] == "coach.done")
    assert done["status"] == MessageStatus.WITHDRAWN
    assert "excuses" not in done["text"].lower()
    checks = await sync_to_async(
        lambda: set(
            QualityFinding.objects.filter(turn__session=session, surface="coach").values_list("check_name", flat=True)
        )
    )()
    assert "blocked_move" in checks


async def two_turns(stack: LiveStack, second_text: str) -> tuple[Any, list[dict[str, Any]]]:
    """A first turn on which Stability blocks a direct challenge, then a second turn; the second
    turn's events."""
    user = await sync_to_async(make_coachee)()
    session = await sync_to_async(session_start)(user_id=user.pk)
    cookie = await sync_to_async(login_cookie)("coachee", "pw-for-tests-1")
    async with ChatClient(stack, session, cookie) as chat:
        await chat.send({"type": "user.message", "client_id": "t-1", "text": "I keep skipping my evening runs."})
        await chat.until(lambda e: e["type"] == "turn.done", timeout_s=60)
        seen = len(chat.events)
        await chat.send({"type": "user.message", "client_id": "t-2", "text": second_text})
        await chat.until(lambda e: e["type"] == "turn.done" and len(chat.events) > seen, timeout_s=60)
        return session, chat.events[seen:]


def coach_config(sim: SimulatorServer, *replies: str) -> None:
    sim.configure(
        agents={
            "coach": {"script": list(replies), "repeat_last": True},
            "stability": {"script": [BLOCKING_STABILITY], "repeat_last": True},
            "synth": {"script": [synth(GOOD)], "repeat_last": True},
            "critic": {"script": [CLEAN_CRITIC], "repeat_last": True},
        }
    )


BLOCKING_STABILITY = {
    "risks": [{"description": "Strain", "severity": 4, "detectability": 3, "reversibility": 2}],
    "blocked_moves": ["direct_challenge"],
    "escalation": "monitor",
    "rationale": "Pressure would not help now.",
}
