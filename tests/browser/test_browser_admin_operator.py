"""The operator's admin in a real browser: Debian's Chromium driven by Playwright's sync API,
against the live stack (Daphne) and the simulated model server. An operator logs in, edits a
prompt as a new draft, replays it on three past turns, activates it; tests an endpoint.
Screenshots go to test-output/screenshots/operator-*.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from playwright.sync_api import BrowserContext, Page, expect

from agents.models import AgentRun, ModelEndpoint, PromptStatus, PromptVersion
from agents.operations import prompts
from agents.turns import dispatch
from tests.support.browser import SCREENSHOTS, admin_log_in, off_loop
from tests.support.drafts import CANARY, DRAFT_BODY, ORIGINAL, REPLAYED, snapshot, stored_coach_run
from tests.support.people import PASSWORD, make_operator, make_platform_admin
from tests.support.stack import LiveStack
from tests.support.turns import stored_turn

pytestmark = [
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(120),
]

SERVES = "static/chat/chat.css"
VIEWPORT = {"width": 1280, "height": 900}
TIMEOUT_MS = 15_000

EDIT = "\nWhen the coachee has tried and failed before, prefer structure: an if-then plan with a cue.\n"


def shot(page: Page, name: str, *, full: bool = True) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"operator-{name}.png"
    page.screenshot(path=str(path), full_page=full)
    return path


def test_an_operator_edits_replays_and_activates_a_prompt(
    context: BrowserContext, live_stack: LiveStack, live_sim: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three past turns, made here on the simulator (the Celery canvas is not needed for them).
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    live_sim.configure(
        default={"ttft_ms": 0, "tokens_per_s": 0}, agents={"plasticity": {"script": [ORIGINAL], "repeat_last": True}}
    )
    off_loop(make_operator, "op", PASSWORD)
    runs = [off_loop(stored_turn, f"coachee{i}", text=f"{CANARY} {i}: I skipped my run again.") for i in range(3)]
    originals = {run.pk: off_loop(snapshot, run) for run in runs}
    v1 = PromptVersion.objects.get(agent="plasticity", status=PromptStatus.ACTIVE)

    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    admin_log_in(page, live_stack, "op", "/admin/agents/promptversion/")
    row = page.locator('#pv-agents tr[data-agent="plasticity"]')
    expect(row).to_contain_text("v1")
    shot(page, "1-prompt-versions", full=False)

    # Edit the active version: the result is a new draft; v1 stays as it was.
    row.get_by_role("link", name="v1").click()
    expect(page.locator("#pv-state")).to_contain_text("This is the prompt every plasticity run uses now")
    page.locator("#pv-edit").click()
    editor = page.get_by_label("Prompt text")
    expect(editor).to_have_value(v1.body)
    editor.press("Control+End")
    editor.press_sequentially(EDIT)
    shot(page, "2-edit-as-draft", full=False)
    page.get_by_role("button", name="Save as new draft").click()
    expect(page.locator("ul.messagelist")).to_contain_text("Saved plasticity v2 as a draft from v1")
    expect(page.locator("#pv-state")).to_contain_text("Compared with the active v1: +2 / \u22120 lines")
    draft = PromptVersion.objects.get(agent="plasticity", version=2)
    assert draft.status == PromptStatus.DRAFT
    assert draft.body == v1.body + EDIT
    shot(page, "3-draft-saved")

    # Replay it on the three stored turns: the new output beside the original, validated.
    live_sim.configure(agents={"plasticity": {"script": [REPLAYED], "repeat_last": True}})
    page.locator("#pv-replay").click()
    boxes = page.locator('#replay-candidates input[name="runs"]')
    expect(boxes).to_have_count(3)
    for box in boxes.all():
        expect(box).to_be_checked()
    expect(page.locator("#content-main")).not_to_contain_text(CANARY)
    page.get_by_role("button", name="Replay v2 on the chosen runs").click()
    # A background task (the stack's Celery worker) replays; the page shows progress and
    # refreshes itself until the result is stored.
    expect(page.locator("#replay-job")).to_be_visible()
    expect(page.locator("#replay-summary")).to_contain_text(
        "3 of 3 runs replayed, 3 validated, 3 gave a different output", timeout=30_000
    )
    expect(page.locator("#replay-job")).to_have_attribute("data-status", "done")
    page.reload()  # the result stays: the page can be left and reopened
    cards = page.locator("section.replay-card")
    expect(cards).to_have_count(3)
    for card in cards.all():
        expect(card).to_have_attribute("data-valid", "true")
        strategy = card.locator('tr[data-field="strategy"]')
        expect(strategy.locator("td.original")).to_have_text("support")
        expect(strategy.locator("td.new")).to_have_text("structure")
    expect(page.locator("#content-main")).not_to_contain_text(CANARY)
    shot(page, "4-replay-side-by-side")
    assert {run.pk: off_loop(snapshot, run) for run in runs} == originals
    assert AgentRun.objects.filter(agent="plasticity").count() == 3

    # Activate it, after a look at what changes.
    page.get_by_role("link", name="Back to replaying v2").click()
    expect(page.locator("#replay-jobs")).to_contain_text("3 of 3")
    page.get_by_role("link", name="Back to v2").click()
    page.locator("#pv-activate").click()
    expect(page.locator("#content-main")).to_contain_text("The active v1 will be retired")
    expect(page.locator("#diff-table tr.diff-add")).to_have_count(2)
    shot(page, "5-activate-confirm")
    page.get_by_role("button", name="Yes, activate v2").click()
    expect(page.locator("ul.messagelist")).to_contain_text(
        "Activated plasticity v2 (v1 retired): the next plasticity run uses it."
    )
    expect(page.locator("#pv-state")).to_contain_text("This is the prompt every plasticity run uses now")
    expect(page.locator("#pv-rollback")).to_have_text("Roll back to v1…")
    shot(page, "6-activated")
    draft.refresh_from_db()
    v1.refresh_from_db()
    assert (draft.status, v1.status) == (PromptStatus.ACTIVE, PromptStatus.RETIRED)
    assert draft.activated_by is not None
    assert draft.activated_by.username == "op"

    # Who did what, and when: the version's history.
    page.get_by_role("link", name="History").click()
    for message in ("Created draft v2 from v1 (active).", "Replayed v2 on 3 past runs", "Activated v2 (replacing v1)."):
        expect(page.locator("#change-history")).to_contain_text(message)
    shot(page, "7-history", full=False)
    assert set(LogEntry.objects.values_list("user__username", flat=True)) == {"op"}

    # And back: the list offers a rollback to v1, which asks first.
    page.get_by_role("link", name="Prompt versions").first.click()
    row = page.locator('#pv-agents tr[data-agent="plasticity"]')
    expect(row).to_contain_text("v2")
    row.get_by_role("link", name="roll back…").click()
    expect(page.locator("#content-main")).to_contain_text("plasticity goes back to v1")
    shot(page, "8-rollback-confirm", full=False)
    page.get_by_role("button", name="Yes, roll back to v1").click()
    expect(page.locator("ul.messagelist")).to_contain_text("Rolled plasticity back to v1")
    v1.refresh_from_db()
    assert v1.status == PromptStatus.ACTIVE
    assert errors == []


def test_a_platform_administrator_tests_an_endpoint_connection(
    context: BrowserContext, live_stack: LiveStack, live_sim: Any
) -> None:
    # Endpoints (where coachees' words may be sent) are a platform administrator's to change.
    off_loop(make_platform_admin, "platform", PASSWORD)
    endpoint = ModelEndpoint.objects.get(name="test")
    page = context.new_page()
    admin_log_in(page, live_stack, "platform", f"/admin/agents/modelendpoint/{endpoint.pk}/change/")
    expect(page.locator(".field-used_by_detail")).to_contain_text("they share one model instance")
    shot(page, "9-endpoint", full=False)
    page.get_by_role("button", name="Test connection").click()
    result = page.locator('section.connection-result[data-endpoint="test"]')
    expect(result).to_have_attribute("data-ok", "true")
    expect(result).to_contain_text("✓ ready")
    expect(result.locator("code.configured")).to_have_text("sim-model")
    expect(result).to_contain_text("The configured model sim-model is served.")
    shot(page, "10-endpoint-test", full=False)
    assert len(live_sim.calls(agent="connection-test")) == 1


def test_an_operator_tries_a_coach_draft_on_a_past_turn(
    context: BrowserContext, live_stack: LiveStack, live_sim: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    live_sim.configure(default={"ttft_ms": 0, "tokens_per_s": 0})
    off_loop(make_operator, "op", PASSWORD)
    original = "That sounds like a hard week. What got in the way of your runs?"
    run = off_loop(stored_coach_run, "coachee-c", original)
    draft = off_loop(
        lambda: prompts.prompt_draft_create(
            agent="coach", body="Be brief, end with one question. ${blocked_moves}", user=None
        )
    )
    new = "Missing runs happens. Which morning could you protect for one short run?"
    live_sim.configure(agents={"coach": {"script": [new], "repeat_last": True}})

    page = context.new_page()
    admin_log_in(page, live_stack, "op", f"/admin/agents/promptversion/{draft.pk}/change/")
    page.locator("#pv-replay").click()
    expect(page.locator(f'#replay-candidates input[value="{run.pk}"]')).to_be_checked()
    page.get_by_role("button", name=f"Replay v{draft.version} on the chosen runs").click()
    expect(page.locator("#replay-summary")).to_contain_text("1 of 1 runs replayed, 1 validated", timeout=30_000)
    texts = page.locator("section.replay-card .coach-texts")
    expect(texts.locator(".original pre")).to_have_text(original)
    expect(texts.locator(".new pre")).to_have_text(new)
    shot(page, "coach-replay")


def test_an_operator_scores_a_draft_on_an_evaluation_set_before_activating_it(
    context: BrowserContext, live_stack: LiveStack, live_sim: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    live_sim.configure(
        default={"ttft_ms": 0, "tokens_per_s": 0}, agents={"plasticity": {"script": [ORIGINAL], "repeat_last": True}}
    )
    off_loop(make_operator, "op", PASSWORD)
    for i in range(2):
        off_loop(stored_turn, f"coachee-e{i}", text=f"I skipped my run again ({i}).")
    draft = off_loop(lambda: prompts.prompt_draft_create(agent="plasticity", body=DRAFT_BODY, user=None))
    live_sim.configure(agents={"plasticity": {"script": [REPLAYED], "repeat_last": True}})

    page = context.new_page()
    admin_log_in(page, live_stack, "op", f"/admin/agents/promptversion/{draft.pk}/replay/")
    page.get_by_label("or keep the chosen runs as an evaluation set named").fill("skipped runs")
    page.get_by_role("button", name="Keep as evaluation set").click()
    expect(page.locator("ul.messagelist")).to_contain_text("Kept 2 runs as the evaluation set skipped runs")
    page.get_by_role("button", name=f"Evaluate v{draft.version} on it").click()
    expect(page.locator("#replay-score")).to_contain_text("2 of 2 valid (100%), 0 findings", timeout=30_000)
    expect(page.locator("#replay-score")).to_have_attribute("data-passed", "true")
    shot(page, "evaluation-score")
    page.goto(f"{live_stack.http_url}/admin/agents/promptversion/{draft.pk}/activate/")
    row = page.locator('#evaluations tr[data-set="skipped runs"]')
    expect(row).to_contain_text("2 of 2 valid (100%)")
    expect(row).to_have_attribute("data-passed", "true")
    shot(page, "evaluation-before-activation")
