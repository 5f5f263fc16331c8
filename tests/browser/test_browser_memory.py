"""The memory page in Chromium: clean sentences only, a source link that opens the chat at the
message it came from, and Delete (asked first) that removes the item. Screenshots in
test-output/screenshots/memory-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import BrowserContext, expect

from agents.memory import blackboard
from agents.models import BlackboardVersion
from tests.support.browser import log_in, screenshot, watch_page_errors
from tests.support.people import make_coachee
from tests.support.stack import LiveStack
from tests.support.turns import MARKUP, remembered

pytestmark = [
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(120),
]

SERVES = "static/chat/confirm.js"
VIEWPORT = {"width": 1100, "height": 900}


def test_the_memory_page_reads_cleanly_links_its_sources_and_deletes(
    context: BrowserContext, live_stack: LiveStack, seeded_tx: None
) -> None:
    user = make_coachee("mia")
    data, third = remembered(user)
    page = context.new_page()
    errors = watch_page_errors(page)
    log_in(page, live_stack, "mia", "/memory/")
    body = page.locator("main").inner_text()
    assert MARKUP not in body
    assert "confident" not in body
    assert "You tend to put things off until later." in body
    priorities = page.locator("ol.memory-items").nth(1).locator("> li")
    expect(priorities).to_have_count(2)
    screenshot(page, "memory-page")

    # The source opens the conversation at that message, marked.
    page.get_by_role("link", name="your message in turn 3").first.click()
    target = page.locator(f"#msg-{third.user_message.seq}")
    expect(target).to_contain_text("I skipped my run again")
    expect(target).to_be_in_viewport()
    # The chat's modules render after the navigation to the anchor: wait for the mark, not a race.
    page.wait_for_function(
        "id => document.querySelector(':target')?.id === id", arg=f"msg-{third.user_message.seq}", timeout=5_000
    )
    screenshot(page, "memory-source-opened")

    # Delete asks first; cancelled, nothing changes; confirmed, the item is gone everywhere.
    page.goto(f"{live_stack.http_url}/memory/")
    goal = data["stated_goals"][0]["id"]
    item = page.locator(f'li[data-item-id="{goal}"]')
    page.once("dialog", lambda dialog: dialog.dismiss())
    item.get_by_role("button", name="Delete").click()
    expect(item).to_have_count(1)
    page.once("dialog", lambda dialog: dialog.accept())
    item.get_by_role("button", name="Delete").click()
    expect(page.get_by_role("status")).to_contain_text("Deleted, also from the coach")
    expect(page.locator(f'li[data-item-id="{goal}"]')).to_have_count(0)
    assert all(blackboard.find_item(v.data, goal) is None for v in BlackboardVersion.objects.filter(coachee=user))
    assert errors == []
