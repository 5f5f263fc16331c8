"""Synthetic coachees with many earlier sessions, for the context figure and the memory tests.

Each earlier session has a few messages and a verified summary; the last one also has a
turn whose Stability run blocked a move and whose Shadow prediction is still open, so every
kind of pinned fact is there. The current session has `history_messages` messages and an
open turn on the last one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from agents.memory import blackboard
from agents.models import (
    SPECIALISTS,
    Agent,
    AgentRun,
    BlackboardVersion,
    CoachingSession,
    Message,
    Prediction,
    Role,
    RunStatus,
    SessionStatus,
    SessionSummary,
    SummaryScope,
    SummaryStatus,
    SummaryStrategy,
    Turn,
)
from agents.pipeline import steps
from agents.roles.schemas import EvidencedItem, FollowThroughPrediction, ShadowOutput
from agents.turns import accept, event_log, sessions

PINNED_GOAL = "Run a 10k race before the summer"
PINNED_COMMITMENT = "Go running on Tuesday and Thursday mornings"
PINNED_BLOCKED_MOVE = "direct_challenge"

TOPICS = ["running", "sleep", "work deadlines", "cooking at home", "reading", "saving money", "calling family"]


def _sentence(i: int, words: int) -> str:
    topic = TOPICS[i % len(TOPICS)]
    filler = (f"this week {topic} went partly to plan and partly not because of meetings and mood " * 8).split()
    return f"Session note {i}: " + " ".join(filler[:words]) + "."


def summary_data(i: int) -> dict[str, Any]:
    topic = TOPICS[i % len(TOPICS)]
    return {
        "goals": [f"Make {topic} a steady habit", "Keep evenings free for rest"],
        "commitments": [{"text": f"Spend twenty minutes on {topic} three times a week", "due": None}],
        "open_threads": [f"What gets in the way of {topic} on busy days"],
        "patterns": ["overcommitment"],
        "blocked_moves": [],
        "overview": _sentence(i, 45),
    }


@dataclass
class SyntheticCoachee:
    user: Any
    turn: Turn


def _add_message(session: CoachingSession, role: str, text: str) -> Message:
    return Message.objects.create(session=session, seq=event_log.next_seq(session.pk), role=role, text=text)


def synthetic_coachee(*, username: str, earlier_sessions: int, history_messages: int) -> SyntheticCoachee:
    user = get_user_model().objects.create_user(username=username)
    start = timezone.now() - timedelta(days=earlier_sessions + 1)
    last_session: CoachingSession | None = None
    for i in range(earlier_sessions):
        session = CoachingSession.objects.create(coachee=user, status=SessionStatus.ENDED)
        at = start + timedelta(days=i)
        CoachingSession.objects.filter(pk=session.pk).update(created_at=at, ended_at=at + timedelta(hours=1))
        for j in range(4):
            _add_message(session, Role.USER if j % 2 == 0 else Role.COACH, _sentence(i * 4 + j, 30))
        SessionSummary.objects.create(
            session=session,
            scope=SummaryScope.SESSION,
            covers_until_seq=event_log.next_seq(session.pk),
            attempt=1,
            strategy=SummaryStrategy.ABSTRACTIVE,
            status=SummaryStatus.VERIFIED,
            data=summary_data(i),
        )
        last_session = session
    if last_session is not None:
        _pinned_fact_sources(user, last_session)

    session = sessions.session_start(user_id=user.pk)
    for j in range(history_messages - 1):
        _add_message(session, Role.USER if j % 2 == 0 else Role.COACH, _sentence(j, 40))
    result = accept.turn_accept(
        session_id=session.pk, user_id=user.pk, client_id="last", text="I skipped two runs again. What now?"
    )
    turn = Turn.objects.select_related("session__coachee", "user_message", "context_blackboard", "coach_message").get(
        pk=result.turn_id
    )
    return SyntheticCoachee(user=user, turn=turn)


def _pinned_fact_sources(user: Any, session: CoachingSession) -> None:
    message = _add_message(session, Role.USER, f"I will {PINNED_COMMITMENT.lower()}.")
    earlier = timezone.now() - timedelta(days=2)
    turn = Turn.objects.create(session=session, user_message=message, deadline_at=earlier, status="done")
    Turn.objects.filter(pk=turn.pk).update(started_at=earlier)
    AgentRun.objects.create(
        turn=turn,
        agent=Agent.STABILITY,
        status=RunStatus.SUCCEEDED,
        parsed_output={"risks": [], "blocked_moves": [PINNED_BLOCKED_MOVE], "escalation": "none", "rationale": "x"},
    )
    shadow = ShadowOutput(
        stated_goals=[EvidencedItem(text=PINNED_GOAL, evidence=[message.pk])],
        revealed_priorities=[],
        follow_through=FollowThroughPrediction(
            commitment=PINNED_COMMITMENT, probability_pct=60, horizon_days=7, rationale="Said it twice."
        ),
        pattern_class="overcommitment",
        pattern_confidence_pct=55,
    )
    data = blackboard.merge_shadow(blackboard.empty(), shadow, turn_id=turn.pk, at=earlier.isoformat())
    BlackboardVersion.objects.create(coachee=user, version=1, data=data, source_turn=turn, source_agent=Agent.SHADOW)
    Prediction.objects.create(
        coachee=user,
        turn=turn,
        commitment=PINNED_COMMITMENT,
        probability=0.6,
        horizon_days=7,
        made_at=earlier,
        due_at=earlier + timedelta(days=7),
    )


def turn_steps_run(turn_id: int) -> None:
    """The canvas's steps in order, in this process (what the Celery tasks call)."""
    steps.shadow_step(turn_id=turn_id)
    for agent in SPECIALISTS:
        steps.specialist_step(turn_id=turn_id, agent=agent)
    steps.synth_step(turn_id=turn_id)
