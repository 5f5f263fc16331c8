"""The pipeline's steps against the simulated model server, without Celery: parsing,
bounded retries, idempotent steps, the repair round, and the critic gate."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import connections
from django.utils import timezone

from agents.llm.client import Completion
from agents.llm.errors import LLMOutputError, LLMPermanentError, LLMTransientError
from agents.llm.simulator.server import SimulatorServer
from agents.memory import blackboard
from agents.models import (
    AgentConfig,
    AgentRun,
    BlackboardVersion,
    RunStatus,
    Turn,
    TurnStatus,
)
from agents.pipeline import runner, steps
from agents.pipeline.critic_gate import GateVerdict
from agents.pipeline.replay import agent_run_replay
from agents.roles import structured, turn_setup
from agents.roles.schemas import CriticOutput, ShadowOutput, SynthOutput
from agents.turns import accept, dispatch, finish, sessions
from tests.support.people import make_coachee
from tests.support.turns import CLEAN_CRITIC, REPLY, gate, synth_messages, synth_script

pytestmark = pytest.mark.timeout(60)


CANARY = "CANARY-7f3a-coachee-secret"


BLOCKED = "direct_challenge"


STABILITY_BLOCKING = {
    "risks": [{"description": "Tired", "severity": 2, "detectability": 2, "reversibility": 2}],
    "blocked_moves": [BLOCKED],
    "escalation": "none",
    "rationale": "Pressure would not help now.",
}


CRITIC_OBJECTS = {"violated_moves": [BLOCKED], "unsafe_content": [], "explanation": "It pushes hard."}


def completion(content: Any, finish_reason: str | None = "stop") -> Completion:
    text = content if isinstance(content, str) else json.dumps(content)
    return Completion(content=text, finish_reason=finish_reason, prompt_tokens=10, completion_tokens=5)


def test_parse_output_returns_the_validated_model() -> None:
    output = structured.parse_output(
        completion(synth_script(moves=["tiny_next_step"])), SynthOutput, {"moves": {"tiny_next_step"}}
    )
    assert isinstance(output, SynthOutput)
    assert output.reply == REPLY
    assert output.moves_used == ["tiny_next_step"]


def test_a_reply_cut_off_by_the_token_limit_is_invalid_even_if_it_parses() -> None:
    with pytest.raises(LLMOutputError, match="cut off") as info:
        structured.parse_output(completion(synth_script(), finish_reason="length"), SynthOutput, {})
    assert info.value.raw == json.dumps(synth_script())


def test_parse_output_reports_invalid_json() -> None:
    with pytest.raises(LLMOutputError) as info:
        structured.parse_output(completion('{"reply": "' + CANARY), SynthOutput, {})
    assert len(info.value.errors) == 1
    assert "json" in info.value.errors[0].lower()
    assert CANARY not in info.value.errors[0]
    assert CANARY not in str(info.value)


def test_parse_output_refuses_text_that_is_not_json() -> None:
    with pytest.raises(LLMOutputError) as info:
        structured.parse_output(completion("Sure! Here is the JSON you asked for: {"), SynthOutput, {})
    assert "json" in " ".join(info.value.errors).lower()
    assert "Sure!" not in " ".join(info.value.errors)


@pytest.mark.parametrize(
    ("field", "value", "location"),
    [
        ("signals_used", [CANARY], "signals_used.0"),
        ("reply", CANARY * 100, "reply"),
        ("moves_used", CANARY, "moves_used"),
        ("signals_missing", {"x": CANARY}, "signals_missing"),
    ],
)
def test_validation_errors_do_not_echo_the_input(field: str, value: Any, location: str) -> None:
    payload = synth_script() | {field: value}
    with pytest.raises(LLMOutputError) as info:
        structured.parse_output(completion(payload), SynthOutput, {"moves": {"tiny_next_step"}})
    errors = info.value.errors
    assert [e.split(":")[0] for e in errors] == [location]
    assert all(CANARY not in e for e in errors)
    assert CANARY not in str(info.value)
    assert CANARY in info.value.raw  # kept only as the raw output


def test_errors_for_values_outside_the_allowed_set_do_not_echo_the_input() -> None:
    with pytest.raises(LLMOutputError) as info:
        structured.parse_output(completion(synth_script(moves=[CANARY])), SynthOutput, {"moves": {"tiny_next_step"}})
    assert [e.split(":")[0] for e in info.value.errors] == ["moves_used.0"]
    assert all(CANARY not in e for e in info.value.errors)


def test_parse_output_applies_the_context() -> None:
    payload = CLEAN_CRITIC | {"violated_moves": [BLOCKED]}
    with pytest.raises(LLMOutputError) as info:
        structured.parse_output(completion(payload), CriticOutput, {"blocked_moves": {"stretch_goal"}})
    assert [e.split(":")[0] for e in info.value.errors] == ["violated_moves.0"]
    output = structured.parse_output(completion(payload), CriticOutput, {"blocked_moves": {BLOCKED}})
    assert isinstance(output, CriticOutput)
    assert output.violated_moves == [BLOCKED]


class Flaky:
    """A call that fails with the given errors in turn (or forever), then answers."""

    def __init__(self, *errors: Exception, forever: Callable[[], Exception] | None = None) -> None:
        self.errors = list(errors)
        self.forever = forever
        self.timeouts: list[float] = []

    def __call__(self, timeout_s: float) -> Completion:
        self.timeouts.append(timeout_s)
        if self.errors:
            raise self.errors.pop(0)
        if self.forever is not None:
            raise self.forever()
        return completion("ok")

    @property
    def calls(self) -> int:
        return len(self.timeouts)


def always(error: Callable[[], Exception]) -> Flaky:
    return Flaky(forever=error)


@pytest.fixture
def fast_backoff(settings: Any) -> Any:
    settings.COACHING_LLM_RETRY_BACKOFF_S = 0.001
    return settings


def test_transient_errors_are_retried_until_success(fast_backoff: Any) -> None:
    fast_backoff.COACHING_LLM_MAX_RETRIES = 2
    flaky = Flaky(LLMTransientError("500"), LLMTransientError("429"))
    counter = structured.CallCounter()
    result = structured.call_with_retries(flaky, deadline=time.time() + 30, counter=counter)
    assert result.content == "ok"
    assert counter.calls == 3
    assert flaky.calls == 3


@pytest.mark.parametrize("retries", [0, 2, 4])
def test_transient_errors_are_retried_at_most_max_retries_times(fast_backoff: Any, retries: int) -> None:
    fast_backoff.COACHING_LLM_MAX_RETRIES = retries
    flaky = always(lambda: LLMTransientError("server down"))
    with pytest.raises(LLMTransientError, match="server down"):
        structured.call_with_retries(flaky, deadline=time.time() + 30, counter=structured.CallCounter())
    assert flaky.calls == retries + 1


def test_the_default_retry_count_comes_from_settings(fast_backoff: Any) -> None:
    flaky = always(lambda: LLMTransientError("down"))
    with pytest.raises(LLMTransientError):
        structured.call_with_retries(flaky, deadline=time.time() + 30, counter=structured.CallCounter())
    assert flaky.calls == django_settings.COACHING_LLM_MAX_RETRIES + 1


def test_permanent_errors_are_not_retried(fast_backoff: Any) -> None:
    fast_backoff.COACHING_LLM_MAX_RETRIES = 5
    flaky = Flaky(LLMPermanentError("400 bad request"))
    with pytest.raises(LLMPermanentError, match="400"):
        structured.call_with_retries(flaky, deadline=time.time() + 30, counter=structured.CallCounter())
    assert flaky.calls == 1


def test_output_errors_are_not_retried_here(fast_backoff: Any) -> None:
    flaky = Flaky(LLMOutputError("bad json"))
    with pytest.raises(LLMOutputError):
        structured.call_with_retries(flaky, deadline=time.time() + 30, counter=structured.CallCounter())
    assert flaky.calls == 1


def test_no_call_is_started_past_the_deadline(fast_backoff: Any) -> None:
    flaky = Flaky()
    with pytest.raises(LLMTransientError, match="no time left"):
        structured.call_with_retries(
            flaky, deadline=time.time() + structured.MIN_CALL_SECONDS / 2, counter=structured.CallCounter()
        )
    assert flaky.calls == 0


def test_retries_stop_at_the_deadline(settings: Any) -> None:
    settings.COACHING_LLM_MAX_RETRIES = 1000
    settings.COACHING_LLM_RETRY_BACKOFF_S = 0.1
    flaky = always(lambda: LLMTransientError("down"))
    started = time.time()
    deadline = started + 1.5
    with pytest.raises(LLMTransientError):
        structured.call_with_retries(flaky, deadline=deadline, counter=structured.CallCounter())
    assert 1 < flaky.calls < 20
    # Each call's timeout is what is left before the deadline, and shrinks.
    assert flaky.timeouts[0] <= 1.5
    assert all(later < earlier for earlier, later in zip(flaky.timeouts, flaky.timeouts[1:], strict=False))
    assert min(flaky.timeouts) >= structured.MIN_CALL_SECONDS
    assert time.time() - started < 10


def shadow_script(turn: Turn) -> dict[str, Any]:
    return {
        "stated_goals": [{"text": "Run three times a week", "evidence": [turn.user_message_id]}],
        "revealed_priorities": [{"text": "Work comes first", "evidence": []}],
        "follow_through": {
            "commitment": "Run on Monday",
            "probability_pct": 35,
            "horizon_days": 3,
            "rationale": "Skipped twice already.",
        },
        "pattern_class": "procrastination",
        "pattern_confidence_pct": 70,
    }


def test_shadow_step_is_idempotent(turn: Turn, sim: SimulatorServer) -> None:
    sim.configure(agents={"shadow": {"script": [shadow_script(turn)]}})
    assert steps.shadow_step(turn_id=turn.pk) == RunStatus.SUCCEEDED
    assert steps.shadow_step(turn_id=turn.pk) == RunStatus.SUCCEEDED

    runs = AgentRun.objects.filter(turn=turn, agent="shadow")
    assert runs.count() == 1
    run = runs.get()
    assert run.attempts == 1
    assert run.parsed_output == {**shadow_script(turn), "resolutions": []}
    assert run.prompt_version is not None
    assert run.model_id == "sim-model"
    versions = BlackboardVersion.objects.filter(coachee_id=turn.session.coachee_id)
    assert versions.count() == 1
    board = versions.get()
    assert board.version == 1
    assert board.source_turn_id == turn.pk
    assert [g["text"] for g in board.data["stated_goals"]] == ["Run three times a week"]
    assert board.data["predictions"][0]["commitment"] == "Run on Monday"
    assert len(sim.calls(agent="shadow")) == 1
    assert len(sim.calls(agent="shadow", turn=turn.pk)) == 1


def test_a_run_left_running_by_a_dead_delivery_is_run_again_in_the_same_row(turn: Turn, sim: SimulatorServer) -> None:
    # A worker killed mid-call leaves its run RUNNING; the redelivered task takes it over.
    stale = AgentRun.objects.create(turn=turn, agent="shadow", round=1, prompt_values={"stale": "yes"})
    sim.configure(agents={"shadow": {"script": [shadow_script(turn)]}})
    assert steps.shadow_step(turn_id=turn.pk) == RunStatus.SUCCEEDED

    run = AgentRun.objects.get(turn=turn, agent="shadow")
    assert run.pk == stale.pk
    assert run.prompt_values == {}  # this attempt's inputs, not the dead one's
    assert run.prompt_version is not None
    assert len(sim.calls(agent="shadow")) == 1


def test_shadow_is_only_offered_the_turns_coachee_messages(turn: Turn, sim: SimulatorServer) -> None:
    # The enum of citable message ids reaches validation: an id outside it is refused,
    # and after the one repair the run fails.
    bad = shadow_script(turn)
    bad["stated_goals"][0]["evidence"] = [turn.user_message_id + 1000]
    sim.configure(agents={"shadow": {"script": [bad], "repeat_last": True}})
    assert steps.shadow_step(turn_id=turn.pk) == RunStatus.FAILED
    run = AgentRun.objects.get(turn=turn, agent="shadow")
    assert run.attempts == 2
    assert run.error.startswith("llm_bad_output")
    assert [e.split(":")[1].strip() for e in run.validation_errors] == ["stated_goals.0.evidence.0"] * 2
    assert not BlackboardVersion.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_blackboard_writes_keep_both_turns_findings(
    seeded_tx: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    user = make_coachee()
    session = sessions.session_start(user_id=user.pk)
    first, second = (
        runner.load_turn(
            accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id=f"c-{i}", text=f"Try {i}").turn_id
        )
        for i in (1, 2)
    )
    first_has_read = threading.Event()
    second_committed = threading.Event()
    original = blackboard.merge_shadow

    def merge(data: dict[str, Any], shadow: ShadowOutput, *, turn_id: int, at: str, **kw: Any) -> dict[str, Any]:
        if turn_id == first.pk:  # the first writer has read the latest version; the second one runs now
            first_has_read.set()
            second_committed.wait(10)
        return original(data, shadow, turn_id=turn_id, at=at, **kw)

    def write(turn: Turn) -> None:
        try:
            found = ShadowOutput.model_validate(shadow_script(turn))
            steps.blackboard_write(turn=turn, shadow=found, run=AgentRun(turn=turn, agent="shadow"))
        finally:
            if turn.pk == second.pk:
                second_committed.set()
            connections.close_all()  # this thread's connection

    monkeypatch.setattr(blackboard, "merge_shadow", merge)
    writer = threading.Thread(target=write, args=(first,))
    writer.start()
    assert first_has_read.wait(10)
    other = threading.Thread(target=write, args=(second,))
    other.start()
    other.join(15)
    writer.join(15)
    written = set(BlackboardVersion.objects.filter(coachee=user).values_list("source_turn_id", flat=True))
    assert written == {first.pk, second.pk}


def test_a_disabled_agent_fails_without_a_call(turn: Turn, sim: SimulatorServer) -> None:
    AgentConfig.objects.filter(agent="persona").update(enabled=False)
    turn_setup.clear()  # the step runs in a worker, which reads the setup after the change
    assert steps.specialist_step(turn_id=turn.pk, agent="persona") == RunStatus.FAILED
    run = AgentRun.objects.get(turn=turn, agent="persona")
    assert run.error == "agent is disabled"
    assert run.attempts == 0
    assert sim.calls() == []


def test_a_step_for_a_finished_turn_is_skipped(turn: Turn, sim: SimulatorServer) -> None:
    Turn.objects.filter(pk=turn.pk).update(status=TurnStatus.STOPPED)
    assert steps.shadow_step(turn_id=turn.pk) == "skipped"
    assert steps.specialist_step(turn_id=turn.pk, agent="persona") == "skipped"
    assert sim.calls() == []


def test_invalid_json_from_a_specialist_is_repaired(turn: Turn, sim: SimulatorServer) -> None:
    sim.configure(agents={"persona": {"fault": "invalid_json", "fault_times": 1}})
    assert steps.specialist_step(turn_id=turn.pk, agent="persona") == RunStatus.SUCCEEDED
    run = AgentRun.objects.get(turn=turn, agent="persona")
    assert run.status == RunStatus.SUCCEEDED
    assert run.attempts == 2
    assert len(run.validation_errors) == 1
    assert run.validation_errors[0].startswith("attempt 1: ")
    assert "json" in run.validation_errors[0].lower()
    assert run.parsed_output is not None
    assert set(run.parsed_output) == {"ocean", "recurring_goals", "follow_through", "growth_edges"}
    calls = sim.calls(agent="persona")
    assert [c["fault"] for c in calls] == ["invalid_json", None]
    # The repair call carries the first answer and the errors: a different prompt.
    assert calls[0]["messages_sha"] != calls[1]["messages_sha"]
    assert calls[1]["prompt_tokens"] > calls[0]["prompt_tokens"]


def test_an_answer_cut_off_by_the_token_limit_is_sampled_again_with_repeats_penalised(
    turn: Turn, sim: SimulatorServer
) -> None:
    # A cut-off answer is a model looping: shown its loop in a repair prompt, it loops again.
    sim.configure(agents={"persona": {"fault": "truncated_json", "fault_times": 1}})
    assert steps.specialist_step(turn_id=turn.pk, agent="persona") == RunStatus.SUCCEEDED
    run = AgentRun.objects.get(turn=turn, agent="persona")
    assert run.attempts == 2
    assert run.validation_errors == ["attempt 1: the reply was cut off by the token limit"]
    first, second = sim.calls(agent="persona")
    assert first["finish_reason"] == "length"
    assert first["frequency_penalty"] is None
    assert second["messages_sha"] == first["messages_sha"]  # the same prompt, not the loop
    assert second["frequency_penalty"] == structured.LOOP_BREAKING_FREQUENCY_PENALTY


def test_a_transient_fault_is_retried_within_the_step(turn: Turn, sim: SimulatorServer, settings: Any) -> None:
    settings.COACHING_LLM_RETRY_BACKOFF_S = 0.001
    sim.configure(agents={"stability": {"fault": "http_500", "fault_times": 2}})
    assert steps.specialist_step(turn_id=turn.pk, agent="stability") == RunStatus.SUCCEEDED
    run = AgentRun.objects.get(turn=turn, agent="stability")
    assert run.attempts == 3
    assert run.validation_errors == []
    assert [c["status"] for c in sim.calls(agent="stability")] == [500, 500, 200]


def test_a_permanent_fault_fails_the_agent_at_once(turn: Turn, sim: SimulatorServer) -> None:
    sim.configure(agents={"plasticity": {"fault": "http_400"}})
    assert steps.specialist_step(turn_id=turn.pk, agent="plasticity") == RunStatus.FAILED
    run = AgentRun.objects.get(turn=turn, agent="plasticity")
    assert run.status == RunStatus.FAILED
    assert run.error.startswith("llm_misconfigured")
    assert run.parsed_output is None
    assert len(sim.calls(agent="plasticity")) == 1


def test_a_failed_run_counts_the_call_that_failed(turn: Turn, sim: SimulatorServer) -> None:
    sim.configure(agents={"plasticity": {"fault": "http_400"}})
    steps.specialist_step(turn_id=turn.pk, agent="plasticity")
    assert len(sim.calls(agent="plasticity")) == 1
    assert AgentRun.objects.get(turn=turn, agent="plasticity").attempts == 1


def test_a_run_that_ran_out_of_retries_counts_every_call(turn: Turn, sim: SimulatorServer, settings: Any) -> None:
    settings.COACHING_LLM_RETRY_BACKOFF_S = 0.001
    sim.configure(agents={"persona": {"fault": "http_500"}})
    assert steps.specialist_step(turn_id=turn.pk, agent="persona") == RunStatus.FAILED
    calls = len(sim.calls(agent="persona"))
    assert calls == django_settings.COACHING_LLM_MAX_RETRIES + 1
    assert AgentRun.objects.get(turn=turn, agent="persona").attempts == calls


def test_synth_step_delivers_once(turn: Turn, sim: SimulatorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    sim.configure(
        agents={"synth": {"script": [synth_script()]}, "critic": {"script": [CLEAN_CRITIC], "repeat_last": True}}
    )
    assert steps.synth_step(turn_id=turn.pk) == "delivered"
    turn.refresh_from_db()
    assert turn.status == TurnStatus.DONE
    assert [m.text for m in synth_messages(turn)] == [REPLY]
    assert turn.synth_message_id == synth_messages(turn)[0].pk
    assert turn.flagged is False
    assert turn.degraded is True  # no specialist ran
    assert turn.critic_result == {"round_1": {"passed": True, "violations": [], "critic_ok": True}}
    calls_after_first = len(sim.calls())
    assert calls_after_first == 2  # one synth, one critic

    # A redelivered task for a finished turn does nothing.
    assert steps.synth_step(turn_id=turn.pk) == "skipped"
    # One that loaded the turn while it was still running finds it delivered: stale.
    monkeypatch.setattr(steps.turn_setup, "running_turn", lambda turn_id, load: load(turn_id))
    assert steps.synth_step(turn_id=turn.pk) == "stale"

    assert [m.text for m in synth_messages(turn)] == [REPLY]
    assert len(sim.calls()) == calls_after_first
    assert AgentRun.objects.filter(turn=turn, agent="synth").count() == 1


def test_a_critic_that_objects_twice_leads_to_the_fallback_reply(turn: Turn, sim: SimulatorServer) -> None:
    sim.configure(
        agents={
            "stability": {"script": [STABILITY_BLOCKING]},
            "synth": {
                "script": [
                    synth_script("Push harder on this goal every day."),
                    synth_script("Really, push harder on this goal."),
                ]
            },
            "critic": {"script": [CRITIC_OBJECTS], "repeat_last": True},
        }
    )
    assert steps.specialist_step(turn_id=turn.pk, agent="stability") == RunStatus.SUCCEEDED
    assert steps.synth_step(turn_id=turn.pk) == "delivered"

    turn.refresh_from_db()
    assert turn.brief is not None
    assert turn.brief["blocked_moves"] == [BLOCKED]
    assert [m.text for m in synth_messages(turn)] == [finish.FALLBACK_REPLY]
    assert turn.status == TurnStatus.DONE
    assert turn.flagged is True
    assert turn.flag_reason == f"quality gate: uses blocked move {BLOCKED}"
    assert turn.degraded is True
    assert turn.critic_result == {
        f"round_{n}": {"passed": False, "violations": [f"uses blocked move {BLOCKED}"], "critic_ok": True}
        for n in (1, 2)
    }
    assert len(sim.calls(agent="synth")) == 2
    assert len(sim.calls(agent="critic")) == 2
    rounds = AgentRun.objects.filter(turn=turn, agent__in=["synth", "critic"]).values_list("agent", "round")
    assert sorted(rounds) == [("critic", 1), ("critic", 2), ("synth", 1), ("synth", 2)]


def test_a_second_round_that_passes_is_delivered(turn: Turn, sim: SimulatorServer) -> None:
    sim.configure(
        agents={
            "stability": {"script": [STABILITY_BLOCKING]},
            "synth": {"script": [synth_script("Push harder on this goal every day."), synth_script()]},
            "critic": {"script": [CRITIC_OBJECTS, CLEAN_CRITIC]},
        }
    )
    steps.specialist_step(turn_id=turn.pk, agent="stability")
    assert steps.synth_step(turn_id=turn.pk) == "delivered"
    turn.refresh_from_db()
    assert [m.text for m in synth_messages(turn)] == [REPLY]
    assert turn.critic_result is not None
    assert turn.critic_result["round_2"]["passed"] is True
    # The rejection is kept on the record.
    assert turn.flagged is True
    assert turn.flag_reason == f"quality gate: uses blocked move {BLOCKED}"


def test_the_gate_catches_a_declared_blocked_move_even_when_the_critic_approves(
    turn: Turn, sim: SimulatorServer
) -> None:
    sim.configure(agents={"critic": {"script": [CLEAN_CRITIC]}})
    synth = SynthOutput.model_validate(synth_script(moves=[BLOCKED, "tiny_next_step"]))
    verdict = gate(turn, synth, [BLOCKED])
    assert verdict.passed is False
    assert verdict.critic_ok is True
    assert verdict.violations == [f"declared blocked move {BLOCKED}"]
    assert len(sim.calls(agent="critic")) == 1


def test_the_gate_passes_a_clean_reply(turn: Turn, sim: SimulatorServer) -> None:
    sim.configure(agents={"critic": {"script": [CLEAN_CRITIC]}})
    verdict = gate(turn, SynthOutput.model_validate(synth_script(moves=["tiny_next_step"])), [BLOCKED])
    assert verdict == GateVerdict(passed=True, violations=[], critic_ok=True)


def test_the_gate_reports_unsafe_content(turn: Turn, sim: SimulatorServer) -> None:
    unsafe = CLEAN_CRITIC | {"unsafe_content": ["medication_advice"]}
    sim.configure(agents={"critic": {"script": [unsafe]}})
    verdict = gate(turn, SynthOutput.model_validate(synth_script()), [])
    assert verdict.passed is False
    assert verdict.violations == ["contains medication advice"]


def test_without_a_critic_the_gate_fails_closed_when_moves_are_blocked(turn: Turn, sim: SimulatorServer) -> None:
    sim.configure(agents={"critic": {"fault": "http_400"}})
    verdict = gate(turn, SynthOutput.model_validate(synth_script()), [BLOCKED])
    assert verdict == GateVerdict(passed=False, violations=[], critic_ok=False)


def test_without_a_critic_the_gate_passes_when_nothing_is_blocked(turn: Turn, sim: SimulatorServer) -> None:
    sim.configure(agents={"critic": {"fault": "http_400"}})
    verdict = gate(turn, SynthOutput.model_validate(synth_script()), [])
    assert verdict == GateVerdict(passed=True, violations=[], critic_ok=False)


def test_shadow_output_round_trips_through_the_run(turn: Turn, sim: SimulatorServer) -> None:
    # What a redelivered step reads back is what was validated the first time.
    sim.configure(agents={"shadow": {"script": [shadow_script(turn)]}})
    steps.shadow_step(turn_id=turn.pk)
    output = runner.output_as(runner.succeeded_outputs(turn), "shadow", ShadowOutput)
    assert output is not None
    assert output.pattern_class == "procrastination"
    assert output.stated_goals[0].evidence == [turn.user_message_id]


def test_a_run_replays_with_another_prompt_on_its_stored_inputs(turn: Turn, sim: SimulatorServer) -> None:
    steps.shadow_step(turn_id=turn.pk)
    assert steps.specialist_step(turn_id=turn.pk, agent="plasticity") == RunStatus.SUCCEEDED
    original = AgentRun.objects.get(turn=turn, agent="plasticity")
    stored = (original.raw_output, original.parsed_output, original.prompt_version_id)
    first_call = sim.calls(agent="plasticity")[-1]

    result = agent_run_replay(run=original, prompt_body="A draft: suggest moves.\n${moves}")

    assert result.valid
    assert result.answer.output is not None
    replay_call = sim.calls(agent="plasticity")[-1]
    assert replay_call["id"] != first_call["id"]
    assert replay_call["messages_sha"] != first_call["messages_sha"]  # the draft's text was sent
    original.refresh_from_db()
    assert (original.raw_output, original.parsed_output, original.prompt_version_id) == stored
    assert AgentRun.objects.filter(turn=turn, agent="plasticity").count() == 1


def test_a_replay_reports_invalid_output_without_storing_it(turn: Turn, sim: SimulatorServer) -> None:
    steps.shadow_step(turn_id=turn.pk)
    steps.specialist_step(turn_id=turn.pk, agent="persona")
    run = AgentRun.objects.get(turn=turn, agent="persona")
    sim.configure(agents={"persona": {"fault": "invalid_json"}})
    result = agent_run_replay(run=run, prompt_body="Say anything.")
    assert not result.valid
    assert result.answer.errors
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED


def test_a_turn_whose_agents_cannot_be_queued_gets_the_fallback_at_once(
    turn: Turn, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broker_down(turn_id: int) -> None:
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(dispatch, "turn_pipeline_start", broker_down)
    accept.pipeline_start(turn_id=turn.pk)

    turn.refresh_from_db()
    assert turn.status == TurnStatus.DONE
    assert turn.degraded
    assert turn.flagged
    assert turn.synth_message is not None
    assert turn.synth_message.text == finish.FALLBACK_REPLY


def test_the_sweeper_ends_turns_left_running_past_their_deadline(turn: Turn) -> None:
    # The process holding this turn's watchdogs died: nothing else would ever end it.
    user, session = turn.session.coachee, turn.session
    current = accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id="c-2", text="Still there?")
    Turn.objects.filter(pk=turn.pk).update(deadline_at=timezone.now() - timedelta(seconds=finish.OVERDUE_GRACE_S + 1))

    assert finish.overdue_turns_expire() == 1

    turn.refresh_from_db()
    assert turn.status == TurnStatus.DONE
    assert turn.flag_reason == "deadline passed"
    assert Turn.objects.get(pk=current.turn_id).status == TurnStatus.RUNNING  # within its deadline
    assert finish.overdue_turns_expire() == 0
