"""Operators' services (agents/operations/) and the configuration checks: drafts and their
placeholders, activation and rollback, diffs, replays of a draft on stored runs through the
real pipeline.replay.agent_run_replay against the simulated server, and the endpoint connection test."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.core.checks import Error
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from agents.checks import agents_configured
from agents.llm.simulator.server import SimulatorServer
from agents.llm.simulator.tokens import messages_sha
from agents.memory.context import SharedContext, agent_messages
from agents.models import Agent, AgentConfig, AgentRun, ModelEndpoint, PromptStatus, PromptVersion, RunStatus, Turn
from agents.operations import endpoints, prompts, replay
from agents.operations.diff import body_diff, prompt_diff
from agents.operations.errors import PromptOpError
from agents.operations.evaluation import (
    evaluation_rows,
    evaluation_run_start,
    evaluation_set_create,
    evaluations_of,
    replay_score,
)
from agents.operations.prompts import (
    active_version,
    prompt_body_errors,
    prompt_body_warnings,
    prompt_draft_create,
    prompt_version_activate,
    prompt_version_rollback,
    rollback_target,
)
from agents.pipeline.runner import instructions_for
from agents.turns import accept, sessions
from tests.support.drafts import CANARY, DRAFT_BODY, ORIGINAL, REPLAYED, active, snapshot, stored_coach_run
from tests.support.people import make_coachee, make_operator
from tests.support.stack import free_port
from tests.support.turns import stored_turn

pytestmark = pytest.mark.timeout(90)


def sent_sha(run: AgentRun, body: str) -> str:
    """What a call with `body` on this run's stored inputs sends, as the simulator logs it."""
    shared = SharedContext(text=run.turn.shared_prompt, tokens=0, message_ids=[])
    return messages_sha(agent_messages(shared, instructions_for(body, run.prompt_values, run.extra_instructions)))


@pytest.fixture
def operator(seeded: None) -> Any:
    return make_operator()


def log_messages(obj: Any) -> list[str]:
    return list(
        LogEntry.objects.filter(object_id=str(obj.pk), content_type__model=obj._meta.model_name)
        .order_by("action_time", "pk")
        .values_list("change_message", flat=True)
    )


def test_a_draft_replayed_on_three_turns_then_activated_and_rolled_back(on_sim: SimulatorServer, operator: Any) -> None:
    sim = on_sim
    sim.configure(agents={"plasticity": {"script": [ORIGINAL], "repeat_last": True}})
    runs = [stored_turn(f"coachee{i}", text=f"{CANARY} {i}: I keep skipping my runs.") for i in range(3)]
    originals = {run.pk: snapshot(run) for run in runs}
    v1 = active("plasticity")
    assert all(run.prompt_version_id == v1.pk and run.parsed_output == ORIGINAL for run in runs)
    runs_before = AgentRun.objects.count()

    draft = prompt_draft_create(agent="plasticity", body=DRAFT_BODY, user=operator)
    assert (draft.status, draft.version, draft.created_by) == (PromptStatus.DRAFT, v1.version + 1, operator)
    assert active("plasticity") == v1

    # The replay: the draft's text on each run's stored inputs, through the configured endpoint.
    sim.configure(agents={"plasticity": {"script": [REPLAYED], "repeat_last": True}})
    calls_before = len(sim.calls(agent="plasticity"))
    report = replay.prompt_replay(version=draft, runs=runs, user=operator)

    assert [row.run_id for row in report.rows] == [run.pk for run in runs]
    assert [(row.ran, row.valid, row.changed) for row in report.rows] == [(True, True, True)] * 3
    assert all(row.original_output == ORIGINAL and row.new_output == REPLAYED for row in report.rows)
    assert all(row.original_version == v1.version for row in report.rows)
    assert all(row.new_completion_tokens and row.new_latency_ms is not None for row in report.rows)
    fields = report.rows[0].fields
    assert [f.name for f in fields] == ["preferences", "strategy", "suggested_moves", "rationale"]  # schema order
    assert all(f.changed for f in fields)
    assert [line for line, marked in fields[0].original_lines if marked] == ['  "structure": 3,']
    assert [line for line, marked in fields[0].new_lines if marked] == ['  "structure": 5,']
    assert report.summary == "3 of 3 runs replayed, 3 validated, 3 gave a different output"
    replay_calls = sim.calls(agent="plasticity")[calls_before:]
    assert [c["messages_sha"] for c in replay_calls] == [sent_sha(run, DRAFT_BODY) for run in runs]
    # Stored originals are never changed, and no run was added.
    assert {run.pk: snapshot(run) for run in runs} == originals
    assert AgentRun.objects.count() == runs_before
    assert "Replayed v2 on 3 past runs" in log_messages(draft)[-1]

    # Activating it: the next turn's run records the new version and was sent its text.
    prompt_version_activate(version=draft, user=operator)
    draft.refresh_from_db()
    v1.refresh_from_db()
    assert (draft.status, v1.status) == (PromptStatus.ACTIVE, PromptStatus.RETIRED)
    assert draft.activated_by == operator
    assert draft.activated_at is not None
    after = stored_turn("coachee-next")
    assert after.prompt_version_id == draft.pk
    assert sim.calls(agent="plasticity")[-1]["messages_sha"] == sent_sha(after, DRAFT_BODY)

    # Rolling back restores the old version for the turn after.
    restored = prompt_version_rollback(agent="plasticity", user=operator)
    assert restored == v1
    draft.refresh_from_db()
    assert (active("plasticity"), draft.status) == (v1, PromptStatus.RETIRED)
    again = stored_turn("coachee-after-rollback")
    assert again.prompt_version_id == v1.pk
    assert sim.calls(agent="plasticity")[-1]["messages_sha"] == sent_sha(again, v1.body)
    assert {run.pk: snapshot(run) for run in runs} == originals
    # Who did what, and when, is on record.
    assert log_messages(draft) == [
        "Created draft v2.",
        "Replayed v2 on 3 past runs (turns "
        + ", ".join(str(r.turn_id) for r in runs)
        + "): 3 of 3 runs replayed, 3 validated, 3 gave a different output.",
        "Activated v2 (replacing v1).",
        "Retired by a rollback to v1.",
    ]
    assert log_messages(v1) == ["Retired: v2 was activated.", "Rolled back to v1: it replaces v2."]
    assert set(LogEntry.objects.values_list("user__username", flat=True)) == {"op"}


@pytest.mark.parametrize(
    ("agent", "body", "message"),
    [
        ("plasticity", "Moves: ${moves}. Secret: ${api_key}", "plasticity cannot be given ${api_key}"),
        ("shadow", "Look at ${moves}", "shadow cannot be given ${moves}; it can be given: none"),
        ("stability", "It costs $5", "a '$' that is not a ${placeholder}"),
        ("critic", "   \n", "the prompt is empty"),
    ],
)
def test_a_draft_whose_placeholders_the_agent_cannot_be_given_is_refused(
    operator: Any, agent: str, body: str, message: str
) -> None:
    before = PromptVersion.objects.count()
    with pytest.raises(PromptOpError) as info:
        prompt_draft_create(agent=agent, body=body, user=operator)
    assert message in str(info.value)
    assert PromptVersion.objects.count() == before
    assert not LogEntry.objects.exists()


def test_a_draft_may_use_any_placeholder_its_agent_is_given(operator: Any) -> None:
    draft = prompt_draft_create(
        agent="synth", body="${brief}\n${coach_reply}\n${specialists}\nPrices in $$.", user=operator
    )
    assert draft.status == PromptStatus.DRAFT
    entry = LogEntry.objects.get()
    assert (entry.action_flag, entry.user, entry.object_id) == (ADDITION, operator, str(draft.pk))


def test_editing_the_active_version_makes_a_new_draft_and_changes_nothing_else(operator: Any) -> None:
    v1 = active("stability")
    body = v1.body
    edited = prompt_draft_create(agent="stability", body=body + "\nBe brief.", user=operator, based_on=v1)
    second = prompt_draft_create(agent="stability", body=body + "\nBe briefer.", user=operator, based_on=edited)
    v1.refresh_from_db()
    assert (v1.body, v1.status) == (body, PromptStatus.ACTIVE)
    assert [edited.version, second.version] == [v1.version + 1, v1.version + 2]
    assert PromptVersion.objects.get(pk=edited.pk).body == body + "\nBe brief."
    assert log_messages(second) == [f"Created draft v{second.version} from v{edited.version} (draft)."]


def test_a_draft_cannot_be_based_on_another_agents_version(operator: Any) -> None:
    with pytest.raises(PromptOpError, match="not persona"):
        prompt_draft_create(agent="persona", body="Profile them.", user=operator, based_on=active("shadow"))


def test_unused_inputs_are_a_warning_not_an_error() -> None:
    assert prompt_body_errors("plasticity", "Suggest moves.") == []
    assert prompt_body_warnings("plasticity", "Suggest from ${moves}.") == [
        "the prompt does not use ${persona_profile}, so the agent will not see it"
    ]


def test_activation_retires_the_active_version_and_records_who_and_when(operator: Any) -> None:
    v1 = active("persona")
    draft = prompt_draft_create(agent="persona", body="Profile, carefully.", user=operator)
    prompt_version_activate(version=draft, user=operator)
    assert list(PromptVersion.objects.filter(agent="persona", status=PromptStatus.ACTIVE)) == [draft]
    v1.refresh_from_db()
    assert v1.status == PromptStatus.RETIRED
    assert v1.activated_by is None  # its own activation record is kept as it was
    with pytest.raises(PromptOpError, match="already active"):
        prompt_version_activate(version=draft, user=operator)


def test_activation_is_all_or_nothing(operator: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    v1 = active("persona")
    draft = prompt_draft_create(agent="persona", body="Profile, carefully.", user=operator)
    calls: list[str] = []

    def failing_audit(user: Any, obj: Any, message: str, **kwargs: Any) -> None:
        calls.append(message)
        if message.startswith("Activated"):
            raise RuntimeError("the log is down")

    monkeypatch.setattr(prompts, "audit", failing_audit)
    with pytest.raises(RuntimeError):
        prompt_version_activate(version=draft, user=operator)
    assert calls == ["Retired: v2 was activated.", "Activated v2 (replacing v1)."]
    assert active("persona") == v1
    assert PromptVersion.objects.get(pk=draft.pk).status == PromptStatus.DRAFT


def test_a_version_the_agent_cannot_fill_is_not_activated(operator: Any) -> None:
    bad = PromptVersion.objects.create(agent="persona", version=9, body="Use ${moves}.", status=PromptStatus.DRAFT)
    with pytest.raises(PromptOpError, match="cannot be activated"):
        prompt_version_activate(version=bad, user=operator)
    assert active("persona").version == 1


def test_rollback_restores_the_version_active_before_the_current_one(operator: Any) -> None:
    v1 = active("critic")
    v2 = prompt_draft_create(agent="critic", body="Check ${reply} against ${blocked_moves}.", user=operator)
    v3 = prompt_draft_create(agent="critic", body="Judge ${reply}; blocked: ${blocked_moves}", user=operator)
    with pytest.raises(PromptOpError, match="no earlier active version"):
        prompt_version_rollback(agent="shadow", user=operator)  # only ever had v1
    prompt_version_activate(version=v2, user=operator)
    prompt_version_activate(version=v3, user=operator)
    assert rollback_target("critic") == v2
    assert prompt_version_rollback(agent="critic", user=operator) == v2
    assert active("critic") == v2
    # A second rollback undoes the first; the seeded v1 is next only after that.
    assert prompt_version_rollback(agent="critic", user=operator) == v3
    prompt_version_activate(version=v1, user=operator)
    assert rollback_target("critic") == v3
    # "Previous" is by activation time, not by version number.
    prompt_version_activate(version=v2, user=operator)
    prompt_version_activate(version=v1, user=operator)
    assert prompt_version_rollback(agent="critic", user=operator) == v2
    assert PromptVersion.objects.filter(agent="critic", status=PromptStatus.ACTIVE).count() == 1


def test_the_diff_counts_lines_and_escapes_the_text() -> None:
    diff = body_diff("one\ntwo\nthree\n", "one\n<script>alert(1)</script>\nthree\nfour\n")
    assert (diff.added, diff.removed, diff.changed) == (2, 1, True)
    assert [(line.kind, line.text) for line in diff.lines if line.kind in ("add", "del")] == [
        ("del", "two"),
        ("add", "<script>alert(1)</script>"),
        ("add", "four"),
    ]
    html = str(diff.html)
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert not body_diff("same\n", "same\n").changed
    assert "identical" in str(body_diff("same\n", "same\n").html)


def test_prompt_diff_compares_two_versions(operator: Any) -> None:
    v1 = active("shadow")
    draft = prompt_draft_create(agent="shadow", body=v1.body + "Say less.\n", user=operator)
    diff = prompt_diff(v1, draft)
    assert (diff.old_label, diff.new_label) == ("shadow v1 (active)", "shadow v2 (draft)")
    assert (diff.added, diff.removed) == (1, 0)
    assert [line.text for line in diff.lines if line.kind == "add"] == ["Say less."]


def test_a_replay_that_does_not_validate_is_reported_and_stores_nothing(on_sim: SimulatorServer, operator: Any) -> None:
    run = stored_turn("ana")
    before = snapshot(run)
    draft = prompt_draft_create(agent="plasticity", body=DRAFT_BODY, user=operator)
    on_sim.configure(agents={"plasticity": {"fault": "invalid_json"}})
    report = replay.prompt_replay(version=draft, runs=[run], user=operator)
    (row,) = report.rows
    assert (row.ran, row.valid, row.new_output) == (True, False, None)
    assert row.new_errors
    assert row.new_failure.startswith("llm_bad_output")
    assert row.calls == 2  # the call and its one repair
    assert snapshot(run) == before
    assert report.summary == "1 of 1 runs replayed, 0 validated, 0 gave a different output"


def test_a_replay_keeps_to_its_time_limit(on_sim: SimulatorServer, operator: Any) -> None:
    runs = [stored_turn("ana"), stored_turn("ben")]
    draft = prompt_draft_create(agent="plasticity", body=DRAFT_BODY, user=operator)
    on_sim.configure(agents={"plasticity": {"fault": "hang", "delay_s": 30}})
    started = time.monotonic()
    report = replay.prompt_replay(version=draft, runs=runs, total_timeout_s=1.5)
    assert time.monotonic() - started < 6
    assert not any(row.valid for row in report.rows)
    assert report.rows[-1].new_failure == "not run: the replay's time limit was reached"


def test_a_replay_takes_only_runs_of_the_versions_agent_and_a_bounded_number(
    on_sim: SimulatorServer, operator: Any
) -> None:
    run = stored_turn("ana")
    stability = prompt_draft_create(agent="stability", body="Assess. ${moves}", user=operator)
    with pytest.raises(PromptOpError, match="not stability runs"):
        replay.prompt_replay(version=stability, runs=[run])
    plasticity = prompt_draft_create(agent="plasticity", body=DRAFT_BODY, user=operator)
    with pytest.raises(PromptOpError, match=f"at most {replay.REPLAY_MAX_RUNS}"):
        replay.prompt_replay(version=plasticity, runs=[run] * (replay.REPLAY_MAX_RUNS + 1))
    with pytest.raises(PromptOpError, match="at least one"):
        replay.prompt_replay(version=plasticity, runs=[])
    coach = prompt_draft_create(agent="coach", body="Be kind. ${blocked_moves}", user=operator)
    with pytest.raises(PromptOpError, match="not coach runs"):
        replay.prompt_replay(version=coach, runs=[run])


def test_a_coach_draft_is_replayed_beside_what_the_coachee_read(on_sim: SimulatorServer, operator: Any) -> None:
    original = "That sounds like a hard week. What got in the way of your runs?"
    run = stored_coach_run("ana", original)
    draft = prompt_draft_create(
        agent="coach", body="Answer in two sentences and end with one question. ${blocked_moves}", user=operator
    )
    new = "Missing runs happens to everyone. Which morning this week could you protect for one short run?"
    on_sim.configure(agents={"coach": {"script": [new, '{"reply": "structure"}']}})
    (row,) = replay.prompt_replay(version=draft, runs=[run], user=operator).rows
    assert (row.ran, row.valid, row.changed) == (True, True, True), row.new_errors
    assert (row.original_output, row.new_output) == (original, new)
    assert row.text_reply
    (call,) = on_sim.calls(agent="coach")
    assert call["messages_sha"] == messages_sha(
        agent_messages(
            SharedContext(text=run.turn.shared_prompt, tokens=0, message_ids=[]),
            "Answer in two sentences and end with one question. none",
        )
    )
    # A reply the quality gate would withhold from the coachee does not validate.
    (junk,) = replay.prompt_replay(version=draft, runs=[run]).rows
    assert junk.ran
    assert not junk.valid
    assert any(error.startswith("structured") for error in junk.new_errors), junk.new_errors
    run.refresh_from_db()
    assert run.raw_output == original  # the stored run is the original, unchanged


def test_replay_candidates_are_finished_runs_with_stored_inputs(on_sim: SimulatorServer) -> None:
    first, second = stored_turn("ana"), stored_turn("ben")
    Turn.objects.filter(pk=first.turn_id).update(shared_prompt="")  # an old run, before prompts were kept
    AgentRun.objects.create(turn_id=second.turn_id, agent="plasticity", round=2)  # still running
    assert [run.pk for run in replay.replay_candidates("plasticity")] == [second.pk]
    assert list(replay.replay_candidates("stability")) == []


def test_a_replay_with_model_calls_switched_off_reports_it(seeded: None, operator: Any, settings: Any) -> None:
    settings.COACHING_LLM_ALLOW_REQUESTS = False
    user = make_coachee()
    session = sessions.session_start(user_id=user.pk)
    accepted = accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id="c-1", text="Hello")
    Turn.objects.filter(pk=accepted.turn_id).update(shared_prompt="(shared)")
    run = AgentRun.objects.create(turn_id=accepted.turn_id, agent="shadow", status=RunStatus.FAILED)
    draft = prompt_draft_create(agent="shadow", body="Observe.", user=operator)
    (row,) = replay.prompt_replay(version=draft, runs=[run]).rows
    assert not row.valid
    assert row.new_failure.startswith("llm_disabled")


def test_the_connection_test_lists_models_and_times_a_completion(on_sim: SimulatorServer, operator: Any) -> None:
    endpoint = ModelEndpoint.objects.get(name="test")
    result = endpoints.endpoint_test_connection(endpoint, user=operator)
    assert result.ok, result.summary
    assert (result.models, result.model_listed) == (["sim-model"], True)
    assert result.list_ms is not None
    assert result.completion_ms is not None
    assert result.completion_text
    (call,) = on_sim.calls(agent="connection-test")
    assert call["model"] == "sim-model"
    assert result.verdict == endpoints.Verdict.READY
    assert log_messages(endpoint)[-1].startswith("Tested the connection: OK; ready: it answered; 1 models in")


def test_the_connection_test_flags_a_model_the_server_does_not_list(on_sim: SimulatorServer) -> None:
    endpoint = ModelEndpoint.objects.get(name="test")
    endpoint.model_id = "some-other-model"
    result = endpoints.endpoint_test_connection(endpoint)
    assert result.listed
    assert not result.model_listed
    assert "some-other-model NOT listed" in result.summary


def test_the_connection_test_reports_a_failing_completion(on_sim: SimulatorServer) -> None:
    on_sim.configure(agents={"connection-test": {"fault": "http_500"}})
    result = endpoints.endpoint_test_connection(ModelEndpoint.objects.get(name="test"))
    assert result.listed
    assert not result.ok
    assert "500" in result.completion_error
    assert result.verdict == endpoints.Verdict.FAILING


def test_the_connection_test_tells_a_busy_server_from_a_down_one(
    on_sim: SimulatorServer, monkeypatch: Any, operator: Any
) -> None:
    # Busy: the server lists its models at once but the completion waits in its queue past
    # the test's wait (here 0.3 s against a first token at 2 s), as the embedded model does
    # while a turn runs. It must not read as "failed ... timed out".
    monkeypatch.setattr(endpoints, "TEST_COMPLETION_TIMEOUT_S", 0.3)
    on_sim.configure(agents={"connection-test": {"ttft_ms": 2000}})
    endpoint = ModelEndpoint.objects.get(name="test")
    result = endpoints.endpoint_test_connection(endpoint, user=operator)
    assert result.listed
    assert result.verdict == endpoints.Verdict.BUSY, result.summary
    assert log_messages(endpoint)[-1].startswith("Tested the connection: FAILED; busy: the server is up")
    # 429 says the same: up, pacing us.
    on_sim.configure(agents={"connection-test": {"ttft_ms": 10, "fault": "http_429"}})
    assert endpoints.endpoint_test_connection(endpoint).verdict == endpoints.Verdict.BUSY


def test_vllm_queue_figures_are_read_from_its_metrics_page(monkeypatch: Any) -> None:
    page = (
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 3.0\n'
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
        "# TYPE vllm:num_requests_waiting gauge\n"
        'vllm:num_requests_waiting{engine="0",model_name="m"} 5.0\n'
    )
    seen: list[str] = []

    def fake_get(url: str, **_: Any) -> httpx.Response:
        seen.append(url)
        return httpx.Response(200, text=page, request=httpx.Request("GET", url))

    monkeypatch.setattr(endpoints.httpx, "get", fake_get)
    assert endpoints.server_load("http://gpu-1:8000/v1") == endpoints.ServerLoad(running=3, waiting=5)
    assert seen == ["http://gpu-1:8000/metrics"]
    monkeypatch.setattr(
        endpoints.httpx,
        "get",
        lambda url, **_: httpx.Response(404, text="no", request=httpx.Request("GET", url)),
    )
    assert endpoints.server_load("http://gpu-1:8000/v1") is None


def test_the_connection_test_never_raises_and_gives_up_quickly(seeded: None, operator: Any, settings: Any) -> None:
    settings.COACHING_LLM_ALLOW_REQUESTS = True
    endpoint = ModelEndpoint.objects.create(
        name="nowhere",
        base_url=f"http://127.0.0.1:{free_port()}/v1",
        model_id="m",
        connect_timeout_s=30,
        trusted_for_coachee_data=True,
    )
    started = time.monotonic()
    result = endpoints.endpoint_test_connection(endpoint, user=operator)
    assert time.monotonic() - started < 8
    assert not result.ok
    assert not result.listed
    assert "unreachable" in result.list_error
    assert result.completion_error == "skipped: the server did not answer"
    assert result.verdict == endpoints.Verdict.DOWN
    assert "FAILED" in log_messages(endpoint)[-1]
    broken = ModelEndpoint(name="broken", base_url="not a url", model_id="m", trusted_for_coachee_data=True)
    assert not endpoints.endpoint_test_connection(broken).ok


def error_ids(errors: list[Error]) -> list[tuple[str, str]]:
    return [(e.id or "", e.msg) for e in errors]


def test_a_seeded_configuration_passes_the_checks(seeded: None) -> None:
    assert agents_configured(None) == []


def test_an_agent_without_an_active_prompt_fails_the_check(seeded: None) -> None:
    PromptVersion.objects.filter(agent="synth").update(status=PromptStatus.RETIRED)
    assert error_ids(agents_configured(None)) == [("agents.E001", "agent synth has no active prompt")]


def test_an_agent_whose_endpoint_is_unusable_fails_the_check(seeded: None) -> None:
    embedded = ModelEndpoint.objects.get(name="embedded")
    ModelEndpoint.objects.filter(pk=embedded.pk).update(base_url="")
    ids = error_ids(agents_configured(None))
    assert len(ids) == len(Agent.values)  # every agent, the summarizer too
    assert ids[0] == ("agents.E003", "agent coach uses endpoint embedded, which has no base URL")
    ModelEndpoint.objects.filter(pk=embedded.pk).update(base_url="ftp://example.org/v1")
    assert "is not an http(s) URL" in agents_configured(None)[0].msg
    for usable in ("http://vllm:8000/v1", "https://gpu-host.internal/v1", "http://[::1]:8081/v1"):
        ModelEndpoint.objects.filter(pk=embedded.pk).update(base_url=usable)
        assert agents_configured(None) == [], usable
    ModelEndpoint.objects.filter(pk=embedded.pk).update(base_url="http://bad_host:80/v1")
    assert "without a valid host" in agents_configured(None)[0].msg
    ModelEndpoint.objects.filter(pk=embedded.pk).update(base_url="http://vllm:port/v1")
    assert "not a valid URL" in agents_configured(None)[0].msg
    ModelEndpoint.objects.filter(pk=embedded.pk).update(base_url="http://127.0.0.1:8081/v1", model_id=" ")
    assert agents_configured(None)[0].msg == "agent coach uses endpoint embedded, which names no model"


def test_an_agent_pointing_at_a_missing_endpoint_fails_the_check(seeded: None) -> None:
    # The foreign key is PROTECT and deferred: a dangling id exists only inside a transaction,
    # which is enough to show the check does not trust the join.
    config = AgentConfig.objects.get(agent="stability")
    AgentConfig.objects.filter(pk=config.pk).update(endpoint_id=987654)
    try:
        assert error_ids(agents_configured(None)) == [
            ("agents.E003", "agent stability points at a model endpoint that does not exist")
        ]
        with pytest.raises(SystemCheckError, match=r"agents\.E003"):
            call_command("check")
    finally:
        AgentConfig.objects.filter(pk=config.pk).update(endpoint_id=config.endpoint_id)


def test_an_active_prompt_the_agent_cannot_fill_fails_the_check(seeded: None) -> None:
    PromptVersion.objects.filter(agent="persona", status=PromptStatus.ACTIVE).update(body="Use ${moves}.")
    assert error_ids(agents_configured(None)) == [
        (
            "agents.E004",
            "agent persona's active prompt v1 cannot be filled: it names ${moves}, which this agent is not given",
        )
    ]


def test_a_missing_configuration_still_fails_the_check(seeded: None) -> None:
    AgentConfig.objects.filter(agent="critic").delete()
    assert error_ids(agents_configured(None)) == [("agents.E002", "agent critic has no configuration")]


def test_creation_and_activation_are_addition_and_change_entries(operator: Any) -> None:
    # Activation is a change of the version, so it appears as such in admin's history.
    draft = prompt_draft_create(agent="shadow", body="Observe.", user=operator)
    prompt_version_activate(version=draft, user=operator)
    flags = list(LogEntry.objects.filter(object_id=str(draft.pk)).order_by("pk").values_list("action_flag", flat=True))
    assert flags == [ADDITION, CHANGE]


def test_an_evaluation_set_scores_a_draft_on_what_code_can_check(
    on_sim: SimulatorServer, operator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    runs = [stored_turn(f"e{i}") for i in range(2)]
    # Stability blocked the move the draft is about to suggest, on the first turn only.
    AgentRun.objects.create(
        turn_id=runs[0].turn_id,
        agent="stability",
        status=RunStatus.SUCCEEDED,
        parsed_output={"blocked_moves": ["if_then_plan"], "escalation": "monitor"},
    )
    kept = evaluation_set_create(name="skipped runs", agent="plasticity", run_ids=[r.pk for r in runs], user=operator)
    with pytest.raises(PromptOpError, match="exists already"):
        evaluation_set_create(name="skipped runs", agent="plasticity", run_ids=[runs[0].pk], user=operator)
    with pytest.raises(PromptOpError, match="at least one past plasticity run"):
        evaluation_set_create(name="empty", agent="plasticity", run_ids=[], user=operator)
    draft = prompt_draft_create(agent="plasticity", body=DRAFT_BODY, user=operator)
    on_sim.configure(agents={"plasticity": {"script": [REPLAYED], "repeat_last": True}})
    with django_capture_on_commit_callbacks(execute=False):
        job = evaluation_run_start(version=draft, evaluation_set=kept, user=operator)
    assert job.evaluation_set == kept
    assert sorted(job.run_ids) == sorted(r.pk for r in runs)
    replay.replay_job_run(job.pk)
    (evaluation,) = evaluations_of(draft)
    score = evaluation.score
    assert (score.total, score.ran, score.valid) == (2, 2, 2)
    assert score.blocked_moves_used == 1  # if_then_plan on the first turn
    assert not score.passed
    assert "1 blocked moves used" in score.summary
    (row,) = evaluation_rows(draft, active_version("plasticity"))
    assert row.draft is not None
    assert row.active is None  # the active version was never evaluated on it
    stability = prompt_draft_create(agent="stability", body="Assess. ${moves}", user=operator)
    with pytest.raises(PromptOpError, match="not stability runs"):
        evaluation_run_start(version=stability, evaluation_set=kept, user=operator)


@pytest.mark.django_db
def test_a_stability_draft_that_lowers_a_crisis_does_not_pass() -> None:
    def row(original: str, new: str) -> replay.ReplayRow:
        return replay.ReplayRow(
            run_id=1, turn_id=10**9, round=1, run_started_at=None, original_version=1, original_status="succeeded",
            original_output={"escalation": original, "blocked_moves": []}, original_raw="", original_errors=[],
            original_error="", original_prompt_tokens=None, original_completion_tokens=None,
            original_latency_ms=None, ran=True, valid=True, new_output={"escalation": new, "blocked_moves": []},
        )  # fmt: skip

    report = replay.ReplayReport(1, "stability", 2, "draft", [row("crisis", "monitor"), row("refer", "crisis")], 0)
    score = replay_score(report)
    assert score.escalation_lowered == 1
    assert not score.passed
    assert replay_score(replay.ReplayReport(1, "stability", 2, "draft", [row("monitor", "none")], 0)).passed
