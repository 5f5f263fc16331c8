"""The operators' "last hour per agent" page in Debian's Chromium, after real turns on the live
stack's simulator: the screenshot is test-output/screenshots/operator-last-hour.png."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from agents.turns import dispatch
from tests.support.browser import PASSWORD, SCREENSHOTS, admin_log_in, off_loop
from tests.support.people import make_operator
from tests.support.stack import LiveStack
from tests.support.turns import stored_turn

pytestmark = [
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(120),
]

SERVES = "static/chat/chat.css"


def test_an_operator_reads_the_last_hour_per_agent(
    browser: Browser, live_stack: LiveStack, live_sim: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Turns run on the simulator (Shadow and one specialist each); Persona's are invalid twice
    # (first answer and repair), so the page has failures to show.
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    live_sim.configure(
        default={"ttft_ms": 30, "tokens_per_s": 0}, agents={"persona": {"fault": "invalid_json", "times": 2}}
    )
    off_loop(make_operator, "op", PASSWORD)
    off_loop(stored_turn, "coachee0", agent="plasticity")
    off_loop(stored_turn, "coachee1", agent="stability")
    with pytest.raises(AssertionError):  # stored_turn insists on success; this one fails
        off_loop(stored_turn, "coachee2", agent="persona")

    context = browser.new_context(viewport={"width": 1400, "height": 700})
    context.set_default_timeout(15_000)
    try:
        page = context.new_page()
        admin_log_in(page, live_stack, "op", "/admin/agents/agentconfig/")
        page.get_by_role("link", name="Last hour per agent").click()
        expect(page.locator("h1")).to_have_text("Agents in the last hour")
        expect(page.locator('tr[data-agent="shadow"] td').first).to_have_text("3")
        expect(page.locator('tr[data-agent="persona"]')).to_contain_text("0 %")
        expect(page.locator("#content-main")).to_contain_text("llm_bad_output")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "operator-last-hour.png"), full_page=True)
    finally:
        context.close()
