"""Turns and agent outputs made for tests: stored turns on the simulator, Shadow findings, Synth
scripts, what the memory page shows."""

from __future__ import annotations

import time
from typing import Any

from django.contrib.auth import get_user_model

from agents.memory import blackboard
from agents.models import (
    AgentRun,
    BlackboardVersion,
    Message,
    Role,
    RunStatus,
    Turn,
)
from agents.pipeline import runner, steps
from agents.pipeline.critic_gate import GateVerdict, critic_gate
from agents.roles import turn_setup
from agents.roles.schemas import EvidencedItem, FollowThroughPrediction, ShadowOutput, SynthOutput
from agents.turns import accept, sessions
from tests.support.metrics import scraped
from tests.support.people import make_coachee

CLEAN_CRITIC = {"violated_moves": [], "unsafe_content": [], "explanation": "Nothing to object to."}


REPLY = "One **small** step: what could you do tomorrow?"


def stored_turn(username: str, *, agent: str = "plasticity", text: str = "I keep skipping my runs.") -> AgentRun:
    """A coachee's turn with Shadow and one specialist run on the simulator; returns the run.
    The Celery canvas is not started (callers patch dispatch.turn_pipeline_start)."""
    user = get_user_model().objects.filter(username=username).first() or make_coachee(username)
    session = sessions.session_start(user_id=user.pk)
    accepted = accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id=f"c-{time.time_ns()}", text=text)
    steps.shadow_step(turn_id=accepted.turn_id)
    assert steps.specialist_step(turn_id=accepted.turn_id, agent=agent) == RunStatus.SUCCEEDED
    return AgentRun.objects.select_related("turn", "prompt_version").get(turn_id=accepted.turn_id, agent=agent)


def shadow_findings() -> ShadowOutput:
    return ShadowOutput(
        stated_goals=[EvidencedItem(text="Run three times a week", evidence=[])],
        revealed_priorities=[EvidencedItem(text="Work comes first", evidence=[])],
        follow_through=FollowThroughPrediction(
            commitment="Run on Monday", probability_pct=40, horizon_days=7, rationale="Busy week"
        ),
        pattern_class="overcommitment",
        pattern_confidence_pct=60,
    )


def synth_script(reply: str = REPLY, moves: list[str] | None = None) -> dict[str, Any]:
    return {"reply": reply, "moves_used": moves or [], "signals_used": ["stability"], "signals_missing": []}


def synth_messages(turn: Turn) -> list[Message]:
    return list(Message.objects.filter(session_id=turn.session_id, role=Role.SYNTH))


def gate(turn: Turn, synth: SynthOutput, blocked: list[str]) -> GateVerdict:
    return critic_gate(
        turn=turn,
        shared=runner.turn_shared_context(turn),
        synth=synth,
        brief={"blocked_moves": blocked},
        catalog=turn_setup.move_catalog(),
        round=1,
    )


MARKUP = "} } What the system remembers: <<\u2039data"  # as seen on the page: a lookalike angle quote


def findings(pattern: str = "procrastination", confidence: int = 70) -> ShadowOutput:
    return ShadowOutput(
        stated_goals=[EvidencedItem(text="run three times a week", evidence=[])],
        revealed_priorities=[
            EvidencedItem(text="Work comes first", evidence=[]),
            EvidencedItem(text="Sleep matters more than you say", evidence=[]),
        ],
        follow_through=FollowThroughPrediction(
            commitment="run on Monday", probability_pct=40, horizon_days=7, rationale="Busy week"
        ),
        pattern_class=pattern,
        pattern_confidence_pct=confidence,
    )


def remembered(user: Any) -> tuple[dict[str, Any], Turn]:
    """Three coachee messages; Shadow wrote from the third, with one junk priority and a
    pattern it was not sure of, as older versions did."""
    session = sessions.session_start(user_id=user.pk)
    for n, text in enumerate(["Hi", "Work is a lot", "I skipped my run again"]):
        accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id=f"m{n}", text=text)
    third = Turn.objects.filter(session=session).order_by("started_at").last()
    assert third is not None
    data = blackboard.merge_shadow(blackboard.empty(), findings(), turn_id=third.pk, at="2026-11-30T10:00:00")
    data = blackboard.merge_shadow(data, findings("avoidance", 0), turn_id=third.pk, at="2026-11-30T10:05:00")
    junk = dict(data["revealed_priorities"][0], id="junk1", text=MARKUP)
    data["revealed_priorities"].insert(1, junk)
    BlackboardVersion.objects.create(coachee=user, version=1, data=data)
    return data, third


# What the 135M model wrote in the trial: talk about the machinery, then a JSON fragment.
META_JUNK = "The answer is a JSON with the requested key. The response was: {json}."


GOOD = "One small step could help: what would a ten-minute run tomorrow morning look like for you?"


def synth(reply: str) -> dict[str, Any]:
    return {"reply": reply, "moves_used": [], "signals_used": [], "signals_missing": []}


def accepted_counting(
    session: Any, client_id: str, text: str, *, metric: str, capture_on_commit: Any
) -> tuple[Turn, float]:
    """The turn `text` opens in `session`, its on-commit callbacks run (`capture_on_commit` is
    pytest-django's django_capture_on_commit_callbacks), and how much `metric` rose meanwhile."""
    before = scraped(metric)
    with capture_on_commit(execute=True):
        result = accept.turn_accept(session_id=session.pk, user_id=session.coachee_id, client_id=client_id, text=text)
    return Turn.objects.get(pk=result.turn_id), scraped(metric) - before
