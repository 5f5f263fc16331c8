"""The degraded-mode notice in a real browser: a coachee whose model endpoint fails sees, in
plain words, that their message is saved and the answer will be shorter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from agents import services
from agents.models import SessionEvent
from tests.browser_support import chromium_for, open_chat, screenshot, send, wait_turn_done
from tests.conftest import LiveStack, make_coachee

pytestmark = [
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(120),
]


@pytest.fixture(scope="module")
def browser(live_stack: LiveStack) -> Iterator[Browser]:
    with chromium_for(live_stack, serves="static/chat/chat.js") as browser:
        yield browser


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    ctx = browser.new_context(viewport={"width": 1100, "height": 760})
    ctx.set_default_timeout(10_000)
    yield ctx
    ctx.close()


def test_a_failing_model_server_shows_the_degraded_notice(
    context: BrowserContext, live_stack: LiveStack, live_sim: Any
) -> None:
    # Coach's stream fails (and the server keeps failing, so the breaker opens).
    live_sim.configure(default={"fault": "http_500"})
    user = make_coachee("dee")
    session_id = int(services.session_start(user_id=user.pk).pk)
    page, errors = open_chat(context, live_stack, "dee", session_id)
    send(page, "Why do I stall?")
    notice = page.locator("#notice")
    expect(notice).to_contain_text("unavailable", timeout=15_000)
    expect(notice).to_contain_text("saved")
    screenshot(page, "7-degraded-notice")
    wait_turn_done(page)
    # The end of the turn adds to the notice; it does not take it away.
    expect(notice).to_contain_text("unavailable")
    expect(notice).to_contain_text("could not be prepared")
    assert SessionEvent.objects.filter(session_id=session_id, type="service.degraded").count() == 1
    assert errors == []
