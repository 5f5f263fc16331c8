"""The quality gate on what a coachee reads: Synth's reply regenerated once with the failures named,
then an honest fallback in the coachee's language; Coach's reply held where risks are known and
withdrawn when it fails; every finding recorded for the operators."""

from __future__ import annotations

from typing import Any

import pytest

from agents.llm.schema import AGENT_PRIORITY, BACKGROUND_PRIORITY, extra_body_for
from agents.llm.simulator.server import SimulatorServer
from agents.memory import blackboard
from agents.models import AgentRun, BlackboardVersion, Message, ModelEndpoint, QualityFinding, Role, Turn
from agents.pipeline import reply_gate, runner, steps
from agents.roles import turn_setup
from agents.turns import accept, dispatch, finish, sessions
from tests.support.people import make_coachee
from tests.support.turns import CLEAN_CRITIC, GOOD, META_JUNK, synth

pytestmark = pytest.mark.timeout(120)


JSON_JUNK = '{ "json": { "message": 12 } }'


def synth_replies(turn: Turn) -> list[str]:
    return list(Message.objects.filter(session_id=turn.session_id, role=Role.SYNTH).values_list("text", flat=True))


def script_synth(sim: SimulatorServer, *replies: str) -> None:
    sim.configure(
        agents={
            "synth": {"script": [synth(r) for r in replies], "repeat_last": True},
            "critic": {"script": [CLEAN_CRITIC], "repeat_last": True},
        }
    )


def test_junk_twice_gives_the_fallback_and_flags_the_turn(turn: Turn, sim: SimulatorServer) -> None:
    script_synth(sim, META_JUNK, JSON_JUNK)
    assert steps.synth_step(turn_id=turn.pk) == "delivered"
    turn.refresh_from_db()
    assert synth_replies(turn) == [finish.FALLBACK_REPLY]
    assert turn.flagged
    assert turn.flag_reason.startswith("quality gate: ")
    assert turn.degraded
    # The second round was told what was wrong with the first.
    retry = AgentRun.objects.get(turn=turn, agent="synth", round=2)
    assert retry.extra_instructions.startswith("Your previous reply was rejected: ")
    assert "meta_talk" in retry.extra_instructions
    found = set(QualityFinding.objects.filter(turn=turn).values_list("surface", "check_name", "action", "round"))
    assert ("synth", "meta_talk", "regenerated", 1) in found
    assert ("synth", "structured", "fallback", 2) in found


def test_junk_then_a_good_reply_delivers_the_good_one(turn: Turn, sim: SimulatorServer) -> None:
    script_synth(sim, META_JUNK, GOOD)
    assert steps.synth_step(turn_id=turn.pk) == "delivered"
    turn.refresh_from_db()
    assert synth_replies(turn) == [GOOD]
    result = turn.critic_result or {}
    assert result["round_1"]["passed"] is False
    assert result["round_2"]["passed"] is True
    assert set(QualityFinding.objects.filter(turn=turn).values_list("action", flat=True)) == {"regenerated"}


def test_a_reply_that_echoes_its_prompt_is_not_delivered(turn: Turn, sim: SimulatorServer) -> None:
    # A line of Synth's own instructions, as the small model echoed them in the trial.
    prompt_line = "Moves you must not use with this coachee right now: none. Write the full reply now."
    script_synth(sim, prompt_line + " " + prompt_line)
    steps.synth_step(turn_id=turn.pk)
    assert synth_replies(turn) == [finish.FALLBACK_REPLY]


@pytest.mark.django_db
def test_the_fallback_is_in_the_coachees_language(seeded: None, sim: SimulatorServer, monkeypatch: Any) -> None:
    from tests.support.config import point_agents_at

    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    point_agents_at(sim.base_url)
    sim.configure(default={"ttft_ms": 0, "tokens_per_s": 0})
    user = make_coachee()
    session = sessions.session_start(user_id=user.pk)
    text = "Ich wollte diese Woche dreimal laufen gehen, aber die Arbeit kommt mir ständig dazwischen."
    accepted = accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id="de-1", text=text)
    turn = runner.load_turn(accepted.turn_id)
    script_synth(sim, GOOD)  # English to a German coachee: wrong language, twice
    steps.synth_step(turn_id=turn.pk)
    assert synth_replies(turn) == [finish.FALLBACK_REPLIES["de"]]
    assert QualityFinding.objects.filter(turn=turn, check_name="language").count() == 2


@pytest.mark.parametrize(
    ("language", "text"),
    [
        ("pt", "Prometi a mim mesma estudar inglês todas as manhãs e só consegui duas vezes esta semana."),
        ("ru", "Я хочу ложиться спать до полуночи, но каждый вечер засиживаюсь за сериалами."),
    ],
)
def test_the_deadlines_fallback_and_the_withdrawn_notice_are_in_the_coachees_language(
    seeded: None, monkeypatch: Any, language: str, text: str
) -> None:
    # The deadline's (and a crashed Synth's) fallback was always English, and so was the notice
    # that replaces a withdrawn Coach reply.
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    user = make_coachee()
    session = sessions.session_start(user_id=user.pk)
    accepted = accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id="c-1", text=text)
    assert finish.turn_fallback(turn_id=accepted.turn_id, reason="deadline passed", missing=["synth"])
    turn = Turn.objects.get(pk=accepted.turn_id)
    assert synth_replies(turn) == [finish.FALLBACK_REPLIES[language]]
    assert reply_gate.withdrawn_notice(frozenset({language})) == reply_gate.WITHDRAWN_NOTICES[language]
    assert reply_gate.withdrawn_notice(frozenset()) == reply_gate.WITHDRAWN_NOTICE  # unknown: English


def test_priority_is_sent_only_where_asked_and_only_to_vllm() -> None:
    assert extra_body_for("vllm", thinking=False, priority_of="coach")["priority"] == AGENT_PRIORITY["coach"]
    assert extra_body_for("vllm", thinking=False, priority_of="shadow")["priority"] == BACKGROUND_PRIORITY
    assert "priority" not in extra_body_for("vllm", thinking=False)
    assert extra_body_for("openai", thinking=False, priority_of="coach") == {}
    assert AGENT_PRIORITY["coach"] < AGENT_PRIORITY["synth"] < BACKGROUND_PRIORITY


@pytest.mark.django_db
def test_priority_scheduling_endpoints_get_coach_first(turn: Turn, sim: SimulatorServer) -> None:
    ModelEndpoint.objects.filter(name="test").update(priority_scheduling=True)
    turn_setup.clear()  # the turn's setup was read before the change
    script_synth(sim, GOOD)
    steps.synth_step(turn_id=turn.pk)
    assert [c["priority"] for c in sim.calls(agent="synth")] == [AGENT_PRIORITY["synth"]]


def shadow_with(goals: list[str], commitment: str, pattern: str = "avoidance") -> dict[str, Any]:
    return {
        "stated_goals": [{"text": g, "evidence": []} for g in goals],
        "revealed_priorities": [],
        "follow_through": {"commitment": commitment, "probability_pct": 40, "horizon_days": 7, "rationale": "Busy."},
        "pattern_class": pattern,
        "pattern_confidence_pct": 0,
    }


def test_a_blackboard_write_that_echoes_markup_or_the_system_is_refused(turn: Turn, sim: SimulatorServer) -> None:
    junk_goal = "} } What the system remembers: <<<data"
    sim.configure(
        agents={"shadow": {"script": [shadow_with(["Run three times a week", junk_goal], "The JSON says: {json}")]}}
    )
    assert steps.shadow_step(turn_id=turn.pk) == "succeeded"
    data = BlackboardVersion.objects.get(source_turn=turn).data
    assert [g["text"] for g in data["stated_goals"]] == ["Run three times a week"]
    assert data["predictions"] == []  # the commitment was junk
    refused = QualityFinding.objects.filter(turn=turn, surface="blackboard", action="refused")
    assert refused.count() >= 2
    shown = {item["text"] for item in blackboard.items_for_coachee(data)}
    assert shown == {"Run three times a week", "avoidance (0% confident)"}


def test_an_unclear_pattern_is_not_remembered(turn: Turn, sim: SimulatorServer) -> None:
    sim.configure(agents={"shadow": {"script": [shadow_with(["Sleep before midnight"], "Bed by 23:30", "unclear")]}})
    steps.shadow_step(turn_id=turn.pk)
    data = BlackboardVersion.objects.get(source_turn=turn).data
    assert data["patterns"] == []
    assert [p["commitment"] for p in data["predictions"]] == ["Bed by 23:30"]
