"""Chromium and a page context for every browser test module, defined once.

A module may set SERVES (a static file the live stack must serve before Chromium starts; the
chat page's entry module by default), VIEWPORT, TIMEOUT_MS and PERMISSIONS (granted on the
stack's origin)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, ViewportSize

from tests.support.browser import chromium_for
from tests.support.stack import LiveStack

DEFAULT_VIEWPORT: ViewportSize = {"width": 1100, "height": 760}


@pytest.fixture(scope="module")
def browser(request: pytest.FixtureRequest, live_stack: LiveStack) -> Iterator[Browser]:
    with chromium_for(live_stack, serves=getattr(request.module, "SERVES", "static/chat/main.js")) as chromium:
        yield chromium


@pytest.fixture
def context(request: pytest.FixtureRequest, browser: Browser, live_stack: LiveStack) -> Iterator[BrowserContext]:
    viewport: ViewportSize = getattr(request.module, "VIEWPORT", DEFAULT_VIEWPORT)
    ctx = browser.new_context(viewport=viewport)
    permissions = getattr(request.module, "PERMISSIONS", [])
    if permissions:
        ctx.grant_permissions(permissions, origin=live_stack.http_url)
    ctx.set_default_timeout(getattr(request.module, "TIMEOUT_MS", 10_000))
    yield ctx
    ctx.close()
