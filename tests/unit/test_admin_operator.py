"""The operators' admin pages through Django's test client: prompt drafts, diffs, replays,
activation and rollback, endpoints and their connection test, agent configs, the move
catalog and the crisis configuration; every change is in admin's LogEntry; operators see
configuration, not coachee conversations."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from agents.llm.simulator.server import SimulatorServer
from agents.models import (
    Agent,
    AgentConfig,
    AgentRun,
    CoachingMove,
    CrisisPattern,
    CrisisResource,
    EvaluationSet,
    ModelEndpoint,
    PromptStatus,
    PromptVersion,
    ReplayJob,
)
from agents.operations import prompts, replay
from tests.support.drafts import CANARY, DRAFT_BODY, ORIGINAL, REPLAYED, active, snapshot
from tests.support.people import make_operator, make_platform_admin
from tests.support.turns import stored_turn

pytestmark = pytest.mark.timeout(90)
PASSWORD = "pw-for-tests-1"


def url(name: str, *args: Any) -> str:
    return reverse(f"admin:agents_{name}", args=args)


@pytest.fixture
def operator(seeded: None) -> Any:
    return make_operator()


@pytest.fixture
def op_client(operator: Any) -> Client:
    client = Client()
    client.force_login(operator)
    return client


@pytest.fixture
def platform_admin(seeded: None) -> Any:
    return make_platform_admin()


@pytest.fixture
def pa_client(platform_admin: Any) -> Client:
    client = Client()
    client.force_login(platform_admin)
    return client


def text_of(response: Any) -> str:
    return str(response.content.decode())


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


def last_log(obj: Any) -> LogEntry:
    return LogEntry.objects.filter(object_id=str(obj.pk), content_type__model=obj._meta.model_name).latest("pk")


def test_the_operator_admin_classes_pass_djangos_admin_checks() -> None:
    from django.contrib import admin

    from agents.admin import operator, prompt_versions

    mine = {
        cls
        for module in (operator, prompt_versions)
        for cls in vars(module).values()
        if isinstance(cls, type) and issubclass(cls, admin.ModelAdmin)
    }
    registered = {type(model_admin) for model_admin in admin.site._registry.values()}
    assert {
        operator.ModelEndpointAdmin,
        operator.AgentConfigAdmin,
        prompt_versions.PromptVersionAdmin,
        prompt_versions.EvaluationSetAdmin,
        operator.CoachingMoveAdmin,
        operator.CrisisResourceAdmin,
        operator.CrisisPatternAdmin,
    } <= registered
    errors = [e for e in admin.site.check(None) if type(e.obj) in mine or e.obj in mine]
    assert errors == []


# --- Who may see what --------------------------------------------------------------------------


def test_operators_see_configuration_but_not_conversations(op_client: Client) -> None:
    for name in ("promptversion_changelist", "modelendpoint_changelist", "agentconfig_changelist"):
        assert op_client.get(url(name)).status_code == 200
    for name in ("coachingsession_changelist", "message_changelist", "turn_changelist", "agentrun_changelist"):
        assert op_client.get(url(name)).status_code == 403, name
    index = text_of(op_client.get(reverse("admin:index")))
    assert "Prompt versions" in index
    assert "Coaching sessions" not in index


def test_an_operator_who_is_also_a_coach_sees_conversations_too(seeded: None) -> None:
    client = Client()
    client.force_login(make_operator("both", coach=True))
    assert client.get(url("coachingsession_changelist")).status_code == 200
    assert client.get(url("promptversion_changelist")).status_code == 200


def test_coaches_cannot_change_prompts(seeded: None) -> None:
    coach = get_user_model().objects.create_user("coach", password=PASSWORD, is_staff=True)
    coach.groups.add(Group.objects.get(name="coaches"))
    client = Client()
    client.force_login(coach)
    version = active("shadow")
    assert client.get(url("promptversion_changelist")).status_code == 403
    assert client.post(url("promptversion_edit", version.pk), {"body": "x"}).status_code == 403
    assert client.post(url("promptversion_activate", version.pk)).status_code == 403
    assert client.post(url("promptversion_rollback", "shadow")).status_code == 403
    assert PromptVersion.objects.count() == len(Agent.values)  # nothing was added


def test_the_operator_pages_need_a_login(seeded: None) -> None:
    response = Client().get(url("promptversion_replay", active("shadow").pk))
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


# --- Prompt versions ----------------------------------------------------------------------------


def test_the_list_shows_each_agents_active_version_and_drafts(op_client: Client, operator: Any) -> None:
    draft = prompts.prompt_draft_create(agent="stability", body="Assess. ${moves}", user=operator)
    page = text_of(op_client.get(url("promptversion_changelist")))
    row = re.search(r'<tr data-agent="stability">(.*?)</tr>', page, re.S)
    assert row is not None
    assert f'href="{url("promptversion_change", active("stability").pk)}">v1</a>' in row.group(1)
    assert f'href="{url("promptversion_change", draft.pk)}">v2</a>' in row.group(1)
    assert url("promptversion_new", "stability") in row.group(1)
    assert 'class="pv-status pv-draft"' in page


def test_a_version_page_is_read_only_with_the_operators_actions(op_client: Client) -> None:
    version = active("plasticity")
    page = op_client.get(url("promptversion_change", version.pk))
    html = text_of(page)
    assert page.status_code == 200
    for link in ("edit", "diff", "replay", "history"):
        assert url(f"promptversion_{link}", version.pk) in html
    assert url("promptversion_activate", version.pk) not in html  # already active
    assert 'name="_save"' not in html
    assert "This is the prompt every plasticity run uses now" in html
    # A POST to the standard change form changes nothing.
    assert op_client.post(url("promptversion_change", version.pk), {"body": "x"}).status_code == 403
    version.refresh_from_db()
    assert version.body != "x"


def test_editing_a_version_saves_a_new_draft_and_keeps_the_original(op_client: Client, operator: Any) -> None:
    v1 = active("plasticity")
    form = op_client.get(url("promptversion_edit", v1.pk))
    assert form.status_code == 200
    assert form.context["form"].initial["body"] == v1.body
    assert "${moves}" in text_of(form)
    assert "${persona_profile}" in text_of(form)

    response = op_client.post(url("promptversion_edit", v1.pk), {"body": DRAFT_BODY.replace("\n", "\r\n")})
    draft = PromptVersion.objects.get(agent="plasticity", version=2)
    assert response.status_code == 302
    assert response["Location"] == url("promptversion_change", draft.pk)
    assert (draft.status, draft.body, draft.created_by) == (PromptStatus.DRAFT, DRAFT_BODY, operator)
    v1.refresh_from_db()
    assert v1.status == PromptStatus.ACTIVE
    assert "draft two" not in v1.body
    entry = last_log(draft)
    assert (entry.action_flag, entry.user, entry.change_message) == (
        ADDITION,
        operator,
        "Created draft v2 from v1 (active).",
    )
    follow = op_client.get(response["Location"])
    assert "Saved plasticity v2 as a draft from v1" in " ".join(messages_of(follow))
    assert "Note: the prompt does not use ${persona_profile}" in " ".join(messages_of(follow))
    assert "+" in text_of(follow)
    assert "Compared with the active v1" in text_of(follow)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("Moves: ${moves} and ${brief}", "plasticity cannot be given ${brief}"),
        ("Costs $5", "a &#x27;$&#x27; that is not a ${placeholder}"),
    ],
)
def test_a_draft_with_placeholders_the_agent_is_not_given_is_refused_on_save(
    op_client: Client, body: str, error: str
) -> None:
    v1 = active("plasticity")
    response = op_client.post(url("promptversion_edit", v1.pk), {"body": body})
    assert response.status_code == 200
    assert error in text_of(response)
    assert PromptVersion.objects.filter(agent="plasticity").count() == 1
    assert not LogEntry.objects.exists()


def test_saving_an_unchanged_text_is_refused(op_client: Client) -> None:
    v1 = active("shadow")
    response = op_client.post(url("promptversion_edit", v1.pk), {"body": v1.body})
    assert "Nothing changed: this is the text of v1." in text_of(response)
    assert PromptVersion.objects.filter(agent="shadow").count() == 1


def test_adding_a_version_starts_a_draft_for_a_chosen_agent(op_client: Client, operator: Any) -> None:
    chooser = text_of(op_client.get(url("promptversion_add")))
    assert url("promptversion_new", "critic") in chooser
    assert op_client.get(url("promptversion_add") + "?agent=critic")["Location"] == url("promptversion_new", "critic")
    form = op_client.get(url("promptversion_new", "critic"))
    assert form.context["form"].initial["body"] == active("critic").body
    response = op_client.post(url("promptversion_new", "critic"), {"body": "Judge ${reply}. Blocked: ${blocked_moves}"})
    assert response.status_code == 302
    assert PromptVersion.objects.get(agent="critic", version=2).status == PromptStatus.DRAFT
    assert op_client.get(url("promptversion_new", "nobody")).status_code == 404


def test_the_diff_page_compares_with_the_active_version_and_escapes(op_client: Client, operator: Any) -> None:
    v1 = active("shadow")
    draft = prompts.prompt_draft_create(agent="shadow", body=v1.body + "<b>Say less.</b>\n", user=operator)
    page = op_client.get(url("promptversion_diff", draft.pk))
    html = text_of(page)
    assert page.context["against"] == v1
    assert "<b>Say less.</b>" not in html
    assert '<tr class="diff-add">' in html
    assert "&lt;b&gt;Say less.&lt;/b&gt;" in html
    assert "+1" in html
    assert "\u22120" in html
    # Any other version can be chosen; the active one compares with the one before it.
    other = op_client.get(url("promptversion_diff", v1.pk) + f"?against={draft.pk}")
    assert other.context["against"] == draft
    assert '<tr class="diff-del">' in text_of(other)


def replay_in_background(
    client: Client, version: PromptVersion, run_ids: list[int], capture: Any, monkeypatch: pytest.MonkeyPatch
) -> Any:
    """Post the replay form; the job's task is queued by name on commit; the page shows progress
    until the task (run here, as the worker would) has stored the results; then the result page."""
    with capture(execute=False) as callbacks:
        response = client.post(url("promptversion_replay", version.pk), {"runs": run_ids})
    assert response.status_code == 302, messages_of(response)
    job_url = response["Location"]
    job = ReplayJob.objects.get(version=version, pk=int(job_url.rstrip("/").rsplit("/", 1)[1]))
    sent: list[tuple[str, list[int]]] = []
    monkeypatch.setattr(replay.current_app, "send_task", lambda name, args, **limits: sent.append((name, args)))
    for callback in callbacks:
        callback()
    assert sent == [("coaching.prompt_replay", [job.pk])]
    waiting = text_of(client.get(job_url))
    assert 'http-equiv="refresh"' in waiting
    assert f"0 of {len(run_ids)} runs replayed" in waiting
    replay.replay_job_run(job.pk)
    replay.replay_job_run(job.pk)  # a redelivered task does nothing twice
    assert job.results.count() == len(run_ids)
    return client.get(job_url)


def test_the_replay_page_shows_original_and_new_output_side_by_side(
    on_sim: SimulatorServer,
    op_client: Client,
    operator: Any,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    on_sim.configure(agents={"plasticity": {"script": [ORIGINAL], "repeat_last": True}})
    runs = [stored_turn(f"c{i}", text=f"{CANARY} number {i}") for i in range(4)]
    before = {run.pk: snapshot(run) for run in runs}
    runs_before = AgentRun.objects.count()
    draft = prompts.prompt_draft_create(agent="plasticity", body=DRAFT_BODY, user=operator)

    page = op_client.get(url("promptversion_replay", draft.pk))
    html = text_of(page)
    assert [c.pk for c in page.context["candidates"]] == [r.pk for r in reversed(runs)]
    assert html.count('name="runs"') == 4
    assert html.count(" checked") == 3
    assert CANARY not in html

    on_sim.configure(agents={"plasticity": {"script": [REPLAYED], "repeat_last": True}})
    chosen = runs[:3]
    response = replay_in_background(
        op_client, draft, [r.pk for r in chosen], django_capture_on_commit_callbacks, monkeypatch
    )
    html = text_of(response)
    assert 'http-equiv="refresh"' not in html  # done: the page stops refreshing
    report = response.context["report"]
    assert report.summary == "3 of 3 runs replayed, 3 validated, 3 gave a different output"
    assert html.count('class="replay-card"') == 3
    assert html.count("✓ validated") == 3
    strategy = re.search(r'<tr class="changed" data-field="strategy">(.*?)</tr>', html, re.S)
    assert strategy is not None
    assert re.search(
        r'class="original"><pre><span class="chg-old">support</span></pre>.*'
        r'class="new"><pre><span class="chg-new">structure</span></pre>',
        strategy.group(1),
        re.S,
    )
    # Inside a changed object only the lines that differ are marked.
    preferences = re.search(r'<tr class="changed" data-field="preferences">(.*?)</tr>', html, re.S)
    assert preferences is not None
    assert re.findall(r'class="chg-(?:old|new)">([^<]*)<', preferences.group(1)) == [
        "  &quot;structure&quot;: 3,",
        "  &quot;structure&quot;: 5,",
    ]
    assert CANARY not in html  # the coachee's words are not on the page
    assert {run.pk: snapshot(run) for run in runs} == before
    assert AgentRun.objects.count() == runs_before
    assert last_log(draft).change_message.startswith("Replayed v2 on 3 past runs")
    # The replay page lists it, to come back to.
    assert "3 of 3" in text_of(op_client.get(url("promptversion_replay", draft.pk)))


def test_the_replay_page_reports_invalid_output_and_a_missing_choice(
    on_sim: SimulatorServer,
    op_client: Client,
    operator: Any,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = stored_turn("ana")
    draft = prompts.prompt_draft_create(agent="plasticity", body=DRAFT_BODY, user=operator)
    nothing = op_client.post(url("promptversion_replay", draft.pk), {})
    assert "Choose at least one past run" in " ".join(messages_of(nothing))
    assert not ReplayJob.objects.exists()
    on_sim.configure(agents={"plasticity": {"fault": "invalid_json"}})
    html = text_of(replay_in_background(op_client, draft, [run.pk], django_capture_on_commit_callbacks, monkeypatch))
    assert "✗ did not validate" in html
    assert "What the model answered" in html
    # Coach too: a draft of its prompt can be tried before it goes live.
    coach_page = op_client.get(url("promptversion_replay", active("coach").pk))
    assert coach_page.status_code == 200
    assert coach_page.context["replayable"]


def test_activation_asks_first_then_activates_and_is_logged(op_client: Client, operator: Any) -> None:
    v1 = active("stability")
    draft = prompts.prompt_draft_create(agent="stability", body="Assess risk only.\n${moves}\n", user=operator)
    confirm = op_client.get(url("promptversion_activate", draft.pk))
    html = text_of(confirm)
    assert "Yes, activate v2" in html
    assert "The active <strong>v1</strong> will be retired" in html
    assert '<tr class="diff-add">' in html
    assert active("stability") == v1  # asking changes nothing

    response = op_client.post(url("promptversion_activate", draft.pk))
    assert response["Location"] == url("promptversion_change", draft.pk)
    assert active("stability") == draft
    assert last_log(draft).change_message == "Activated v2 (replacing v1)."
    assert last_log(v1).change_message == "Retired: v2 was activated."
    assert "Activated stability v2 (v1 retired): the next stability run uses it." in " ".join(
        messages_of(op_client.get(response["Location"]))
    )
    history = text_of(op_client.get(url("promptversion_history", draft.pk)))
    assert "Activated v2 (replacing v1)." in history
    assert "Created draft v2." in history
    assert "op" in history
    again = op_client.post(url("promptversion_activate", draft.pk), follow=True)
    assert "already active" in " ".join(messages_of(again))


def test_rollback_asks_first_then_restores_the_previous_version(op_client: Client, operator: Any) -> None:
    v1 = active("persona")
    draft = prompts.prompt_draft_create(agent="persona", body="Profile gently.", user=operator)
    assert "no earlier active version" in text_of(op_client.get(url("promptversion_rollback", "persona")))
    prompts.prompt_version_activate(version=draft, user=operator)
    page = op_client.get(url("promptversion_change", draft.pk))
    assert url("promptversion_rollback", "persona") in text_of(page)
    confirm = text_of(op_client.get(url("promptversion_rollback", "persona")))
    assert "Yes, roll back to v1" in confirm
    response = op_client.post(url("promptversion_rollback", "persona"))
    assert response["Location"] == url("promptversion_change", v1.pk)
    assert active("persona") == v1
    assert last_log(v1).change_message == "Rolled back to v1: it replaces v2."
    assert op_client.post(url("promptversion_rollback", "nobody")).status_code == 404


def test_prompt_versions_cannot_be_deleted(op_client: Client, seeded: None) -> None:
    superuser = get_user_model().objects.create_superuser("root", password=PASSWORD)
    client = Client()
    client.force_login(superuser)
    version = active("synth")
    assert client.post(url("promptversion_delete", version.pk), {"post": "yes"}).status_code == 403
    assert PromptVersion.objects.filter(pk=version.pk).exists()


# --- Model endpoints ------------------------------------------------------------------------------


def test_endpoints_show_which_agents_share_them(op_client: Client) -> None:
    embedded = ModelEndpoint.objects.get(name="embedded")
    AgentConfig.objects.filter(agent__in=["synth", "critic"]).update(
        endpoint=ModelEndpoint.objects.create(name="big", base_url="http://gpu:8000/v1", model_id="qwen")
    )
    listing = text_of(op_client.get(url("modelendpoint_changelist")))
    assert "coach, persona, plasticity, shadow, stability" in listing
    assert "critic, synth" in listing
    page = text_of(op_client.get(url("modelendpoint_change", embedded.pk)))
    assert "they share one model instance" in page
    assert url("agentconfig_change", AgentConfig.objects.get(agent="shadow").pk) in page
    assert url("modelendpoint_test_connection", embedded.pk) in page


def test_the_connection_test_page_lists_models_and_times_a_completion(
    on_sim: SimulatorServer,
    op_client: Client,
    operator: Any,
) -> None:
    endpoint = ModelEndpoint.objects.get(name="test")
    assert op_client.get(url("modelendpoint_test_connection", endpoint.pk)).status_code == 302
    response = op_client.post(url("modelendpoint_test_connection", endpoint.pk))
    html = text_of(response)
    (result,) = response.context["results"]
    assert result.ok
    assert result.model_listed
    assert "✓ ready" in html
    assert '<code class="configured">sim-model</code>' in html
    assert f"{result.completion_ms} ms" in html
    assert last_log(endpoint).change_message.startswith("Tested the connection: OK")
    assert len(on_sim.calls(agent="connection-test")) == 1


def test_the_connection_test_action_reports_each_endpoint(
    on_sim: SimulatorServer,
    op_client: Client,
) -> None:
    ids = list(ModelEndpoint.objects.values_list("pk", flat=True))
    ModelEndpoint.objects.filter(name="embedded").update(base_url="http://127.0.0.1:9/v1")
    response = op_client.post(
        url("modelendpoint_changelist"), {"action": "test_connection", "_selected_action": [str(i) for i in ids]}
    )
    results = {r.endpoint_name: r for r in response.context["results"]}
    assert set(results) == {"embedded", "test"}
    assert results["test"].ok
    assert not results["embedded"].ok
    assert results["embedded"].verdict == "down"  # nothing listens on port 9
    html = text_of(response)
    assert "✓ ready" in html
    assert "✗ down" in html


ENDPOINT_DATA = {
    "name": "gpu",
    "kind": "vllm",
    "base_url": "http://gpu-host:8000/v1",
    "model_id": "qwen3-30b-a3b",
    "api_key_env": "COACHING_LLM_KEY_GPU",
    "max_concurrency": 8,
    "connect_timeout_s": 5,
    "read_timeout_s": 120,
}


def test_operators_cannot_add_or_change_endpoints(op_client: Client) -> None:
    embedded = ModelEndpoint.objects.get(name="embedded")
    before = list(ModelEndpoint.objects.values())
    assert op_client.get(url("modelendpoint_add")).status_code == 403
    assert op_client.post(url("modelendpoint_add"), ENDPOINT_DATA).status_code == 403
    changed = ENDPOINT_DATA | {"name": "embedded", "base_url": "http://127.0.0.1:9999/v1"}
    assert op_client.post(url("modelendpoint_change", embedded.pk), changed).status_code == 403
    assert list(ModelEndpoint.objects.values()) == before
    page = text_of(op_client.get(url("modelendpoint_change", embedded.pk)))  # a read-only view
    assert 'name="base_url"' not in page


def test_a_platform_admin_adds_an_endpoint_and_the_addition_is_logged(pa_client: Client, platform_admin: Any) -> None:
    assert pa_client.post(url("modelendpoint_add"), ENDPOINT_DATA).status_code == 302
    endpoint = ModelEndpoint.objects.get(name="gpu")
    assert not endpoint.trusted_for_coachee_data  # trust is a separate, deliberate choice
    entry = last_log(endpoint)
    assert (entry.action_flag, entry.user) == (ADDITION, platform_admin)
    assert "No agent uses this endpoint." in text_of(pa_client.get(url("modelendpoint_change", endpoint.pk)))


@pytest.mark.parametrize("name", ["DATABASE_URL", "DJANGO_SECRET_KEY", "EMAIL_HOST_PASSWORD", "GPU_API_KEY", "x y"])
def test_api_key_variables_outside_the_allow_list_are_refused_on_save(pa_client: Client, name: str) -> None:
    response = pa_client.post(url("modelendpoint_add"), ENDPOINT_DATA | {"api_key_env": name})
    assert response.status_code == 200
    assert "Not allowed:" in text_of(response)
    assert not ModelEndpoint.objects.filter(name="gpu").exists()


def test_endpoint_edits_are_validated_and_logged_with_old_and_new_values(
    pa_client: Client, platform_admin: Any
) -> None:
    endpoint = ModelEndpoint.objects.get(name="embedded")
    data = {
        "name": "embedded",
        "kind": "llamacpp",
        "base_url": "http://127.0.0.1:8082/v1",
        "model_id": "smollm2-135m-instruct",
        "api_key_env": "",
        "max_concurrency": 0,
        "connect_timeout_s": 5,
        "read_timeout_s": 300,
        "trusted_for_coachee_data": "on",
    }
    not_http = pa_client.post(url("modelendpoint_change", endpoint.pk), data | {"base_url": "ftp://x/v1"})
    assert "This endpoint would have a base URL &#x27;ftp://x/v1&#x27; that is not an http(s) URL." in text_of(not_http)
    bad = pa_client.post(url("modelendpoint_change", endpoint.pk), data)
    assert bad.status_code == 200
    assert "At least 1." in text_of(bad)
    response = pa_client.post(url("modelendpoint_change", endpoint.pk), data | {"max_concurrency": 1})
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.base_url == "http://127.0.0.1:8082/v1"
    entry = last_log(endpoint)
    assert (entry.action_flag, entry.user) == (CHANGE, platform_admin)
    message = entry.get_change_message()
    assert "Base URL: 'http://127.0.0.1:8081/v1' → 'http://127.0.0.1:8082/v1'" in message
    # Platform administrators see every endpoint change in the list; operators do not get it.
    listing = text_of(pa_client.get(url("modelendpoint_changelist")))
    assert 'id="endpoint-changes"' in listing
    assert "→ &#x27;http://127.0.0.1:8082/v1&#x27;" in listing


def test_operators_choose_among_trusted_endpoints_only(op_client: Client) -> None:
    config = AgentConfig.objects.get(agent="coach")
    untrusted = ModelEndpoint.objects.create(name="elsewhere", base_url="http://elsewhere:8000/v1", model_id="m")
    data = {
        "endpoint": untrusted.pk,
        "temperature": 0.3,
        "max_tokens": 600,
        "context_budget": 6000,
        "enabled": "on",
    }
    response = op_client.post(url("agentconfig_change", config.pk), data)
    assert response.status_code == 200
    assert "Select a valid choice" in text_of(response)
    config.refresh_from_db()
    assert config.endpoint.name == "embedded"


# --- Agent configs, moves, crisis configuration ------------------------------------------------------


def test_agent_config_edits_are_validated_and_logged(op_client: Client, operator: Any) -> None:
    config = AgentConfig.objects.get(agent="synth")
    data = {
        "endpoint": config.endpoint_id,
        "temperature": 3.5,
        "max_tokens": 1200,
        "context_budget": 3000,
        "thinking": "on",
        "enabled": "on",
    }
    bad = op_client.post(url("agentconfig_change", config.pk), data)
    assert "Between 0 and 2." in text_of(bad)
    # Below the longest answer Synth's format allows, a long answer would be cut off and fail.
    short = op_client.post(url("agentconfig_change", config.pk), data | {"temperature": 0.9, "max_tokens": 300})
    assert "allows up to about" in text_of(short)
    response = op_client.post(url("agentconfig_change", config.pk), data | {"temperature": 0.9, "agent": "coach"})
    assert response.status_code == 302
    config.refresh_from_db()
    assert (config.agent, config.temperature, config.thinking) == ("synth", 0.9, True)  # agent is read-only
    assert "Temperature" in last_log(config).get_change_message()
    listing = text_of(op_client.get(url("agentconfig_changelist")))
    assert url("promptversion_change", active("synth").pk) in listing
    assert "by op" in listing  # the last change column
    assert op_client.post(url("agentconfig_delete", config.pk), {"post": "yes"}).status_code == 403


def test_moves_lexicon_and_resources_are_audited(op_client: Client, operator: Any) -> None:
    move = CoachingMove.objects.get(key="stretch_goal")
    data = {"key": "renamed", "name": "Stretch goal", "description": "Aim higher.", "pushes": "on", "active": ""}
    assert op_client.post(url("coachingmove_change", move.pk), data).status_code == 302
    move.refresh_from_db()
    assert (move.key, move.active, move.description) == ("stretch_goal", False, "Aim higher.")  # key is read-only
    assert last_log(move).user == operator

    bad = op_client.post(
        url("crisispattern_add"), {"locale": "en", "pattern": "kill (myself", "note": "", "active": "on"}
    )
    assert "Not a valid regular expression" in text_of(bad)
    good = op_client.post(
        url("crisispattern_add"),
        {"locale": "en", "pattern": r"\bno way out\b", "category": "suicide", "active": "on"},
    )
    assert good.status_code == 302
    pattern = CrisisPattern.objects.get(pattern=r"\bno way out\b")
    assert last_log(pattern).action_flag == ADDITION

    resource = CrisisResource.objects.filter(locale="de").first()
    assert resource is not None
    response = op_client.post(
        url("crisisresource_change", resource.pk),
        {
            "locale": "de",
            "kind": resource.kind,
            "source_url": resource.source_url,
            "name": resource.name,
            "contact": "0800 111 0 111",
            "url": resource.url,
            "description": resource.description,
            "order": resource.order,
            "active": "on",
        },
    )
    assert response.status_code == 302
    assert "Contact" in last_log(resource).get_change_message()
    listing = text_of(op_client.get(url("crisisresource_changelist") + "?locale=de"))
    assert url("crisisresource_history", resource.pk) in listing
    assert "by op" in listing
    assert op_client.post(url("coachingmove_delete", move.pk), {"post": "yes"}).status_code == 302
    assert last_log(move).action_flag == 3  # DELETION


def test_operators_see_the_quality_gates_counts_per_check_and_no_conversation(
    op_client: Client, operator: Any, turn: Any
) -> None:
    from agents.models import QualityFinding

    for check, action in [("meta_talk", "withdrawn"), ("meta_talk", "withdrawn"), ("structured", "fallback")]:
        QualityFinding.objects.create(turn=turn, surface="coach", check_name=check, detail="x", action=action)
    page = op_client.get(url("qualityfinding_changelist"))
    assert page.status_code == 200
    counts = [(r["check_name"], r["action"], r["count"]) for r in page.context["check_counts"]]
    assert counts == [("meta_talk", "withdrawn", 2), ("structured", "fallback", 1)]
    filtered = op_client.get(url("qualityfinding_changelist"), {"check_name": "structured"})
    assert [r["count"] for r in filtered.context["check_counts"]] == [1]
    assert turn.user_message.text not in text_of(page)
    finding = QualityFinding.objects.earliest("pk")
    assert op_client.get(url("qualityfinding_change", finding.pk)).status_code == 200
    assert op_client.post(url("qualityfinding_delete", finding.pk)).status_code == 403


def test_a_draft_is_evaluated_on_a_kept_set_and_the_score_shows_before_activation(
    on_sim: SimulatorServer,
    op_client: Client,
    operator: Any,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    on_sim.configure(agents={"plasticity": {"script": [ORIGINAL], "repeat_last": True}})
    runs = [stored_turn(f"s{i}") for i in range(2)]
    draft = prompts.prompt_draft_create(agent="plasticity", body=DRAFT_BODY, user=operator)
    activate_page = text_of(op_client.get(url("promptversion_activate", draft.pk)))
    assert "has no evaluation set yet" in activate_page
    kept = op_client.post(
        url("promptversion_replay", draft.pk),
        {"runs": [r.pk for r in runs], "set_name": "two skipped runs", "save_set": "1"},
    )
    assert "Kept 2 runs as the evaluation set two skipped runs" in " ".join(messages_of(kept))
    evaluation_set = EvaluationSet.objects.get(name="two skipped runs")
    assert "not evaluated" in text_of(op_client.get(url("promptversion_activate", draft.pk)))

    on_sim.configure(agents={"plasticity": {"script": [REPLAYED], "repeat_last": True}})
    with django_capture_on_commit_callbacks(execute=False):
        response = op_client.post(url("promptversion_replay", draft.pk), {"evaluate": str(evaluation_set.pk)})
    job = ReplayJob.objects.get(evaluation_set=evaluation_set)
    assert response["Location"].endswith(f"/replay/{job.pk}/")
    replay.replay_job_run(job.pk)
    html = text_of(op_client.get(response["Location"]))
    assert "Evaluation of" in html
    assert "2 of 2 valid (100%)" in html
    assert "✓ passes" in html
    activate_html = text_of(op_client.get(url("promptversion_activate", draft.pk)))
    assert 'data-set="two skipped runs" data-passed="true"' in activate_html
    assert "2 of 2 valid (100%), 0 findings" in activate_html
    # Operators may keep, rename and delete sets (migration 0024 grants it).
    assert op_client.get(url("evaluationset_change", evaluation_set.pk)).status_code == 200
