"""Crisis alerts to coaches, and the degraded-mode notice to the coachee."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from agents.models import CoachAssignment, Escalation, Turn
from agents.turns import sessions
from tests.support.people import make_coachee
from tests.support.stack import ChatClient, login_cookie

CANARY = "CANARY-9c1e-crisis-alert"


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_thread_connections")
async def test_stabilitys_crisis_on_the_live_stack_alerts_the_coach_by_email(live_stack: Any, live_sim: Any) -> None:
    def setup() -> Any:
        user = make_coachee("alerted")
        coach = get_user_model().objects.create_user(username="their-coach", email="their-coach@example.org")
        CoachAssignment.objects.create(coach=coach, coachee=user)
        return sessions.session_start(user_id=user.pk), login_cookie("alerted", "")

    live_sim.configure(agents={"stability": {"script": [STABILITY_CRISIS]}})
    session, cookie = await sync_to_async(setup)()
    async with ChatClient(live_stack, session, cookie) as client:
        # Indirect enough to pass the pre-gate: Stability is the one that sees the crisis.
        await client.send({"type": "user.message", "client_id": "c-1", "text": f"Nothing matters now {CANARY}"})
        await client.until(lambda e: e["type"] == "turn.done", timeout_s=60)
    turn = await sync_to_async(Turn.objects.get)(session=session)
    assert turn.escalation == Escalation.CRISIS
    assert turn.flagged is True
    # The worker's console email backend prints the alert to its log.
    subject = f"Crisis alert: session {session.pk}, turn {turn.pk}"
    for _ in range(20):
        log = live_stack.log_tail(400)
        if subject in log:
            break
        await asyncio.sleep(0.25)
    assert subject in log
    assert "To: their-coach@example.org" in log
    assert CANARY not in log


STABILITY_CRISIS = {
    "risks": [{"description": "Talk of not going on", "severity": 5, "detectability": 4, "reversibility": 5}],
    "blocked_moves": ["direct_challenge"],
    "escalation": "crisis",
    "rationale": "Possible danger.",
}
