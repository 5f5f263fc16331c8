"""Helpers for the browser tests: launching Debian's Chromium, logging in, reading the chat page."""

from __future__ import annotations

import concurrent.futures
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from django.db import connections
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from benchmarks.trial_turns import CHROMIUM, CHROMIUM_ARGS
from tests.support.people import PASSWORD
from tests.support.stack import OUTPUT_DIR, ROOT, LiveStack

SCREENSHOTS = OUTPUT_DIR / "screenshots"
# A whole turn on the live stack ends within its 20 s deadline; leave room for a slow machine.
TURN_MS = 35_000

T = TypeVar("T")


def fetch(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (the local test server)
            return bytes(response.read())
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}".encode()


@contextmanager
def chromium_for(stack: LiveStack, *, serves: str) -> Iterator[Browser]:
    """Debian's Chromium for one test module, once the stack is known to serve the current
    static file `serves` (a path under the repo, e.g. static/chat/main.js)."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"Debian's Chromium is needed at {CHROMIUM}: apt-get install chromium")
    if fetch(f"{stack.http_url}/{serves}") != (ROOT / serves).read_bytes():
        pytest.fail(f"the live stack does not serve the current {serves} (WHITENOISE_USE_FINDERS)")
    # Playwright's sync API leaves its event loop marked as running on this thread, so Django
    # would refuse ORM calls here. Allowed while the browser runs, after the stack's processes
    # started (they copied the environment then and keep the check).
    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def off_loop(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run fn in a short-lived thread. Playwright's sync API keeps an event loop marked as
    running on the test's thread, and asgiref's async_to_sync refuses to run under one."""

    def call() -> T:
        try:
            return fn(*args, **kwargs)
        finally:
            connections.close_all()  # the thread's own DB connection, or the test DB cannot be dropped

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(call).result(timeout=30)


def log_in(page: Page, stack: LiveStack, username: str, next_path: str, password: str = PASSWORD) -> None:
    """Log in through the real login form and land on next_path."""
    page.goto(f"{stack.http_url}/accounts/login/?next={next_path}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{stack.http_url}{next_path}")


def session_path(session_id: int) -> str:
    return f"/sessions/{session_id}/"


def watch_page_errors(page: Page) -> list[str]:
    """Uncaught exceptions and the page's own console.error reports ("chat: …")."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" and "chat:" in msg.text else None)
    return errors


def open_chat(context: BrowserContext, stack: LiveStack, username: str, session_id: int) -> tuple[Page, list[str]]:
    """A logged-in tab on the session, connected."""
    page = context.new_page()
    errors = watch_page_errors(page)
    log_in(page, stack, username, session_path(session_id))
    expect(page.locator("#connection")).to_have_attribute("data-state", "open")
    return page, errors


def open_second_tab(context: BrowserContext, stack: LiveStack, session_id: int) -> tuple[Page, list[str]]:
    page = context.new_page()
    errors = watch_page_errors(page)
    page.goto(f"{stack.http_url}{session_path(session_id)}")
    expect(page.locator("#connection")).to_have_attribute("data-state", "open")
    return page, errors


def send(page: Page, text: str) -> None:
    """Type a message and press Enter, as a person would."""
    box = page.get_by_label("Your message")
    box.fill(text)
    box.press("Enter")


def wait_turn_done(page: Page, state: str = "done") -> None:
    expect(page.locator("#status-line")).to_have_attribute("data-state", state, timeout=TURN_MS)


def coach_text_longer_than(page: Page, previous: int, timeout_ms: int = 15_000) -> int:
    """Wait until the (last) Coach bubble is still streaming and longer than `previous`."""
    handle = page.wait_for_function(
        """previous => {
            const bubbles = document.querySelectorAll('#messages li.msg-coach');
            const li = bubbles[bubbles.length - 1];
            if (!li || li.dataset.status !== 'streaming') return false;
            const length = li.querySelector('.body').textContent.length;
            return length > previous ? length : false;
        }""",
        arg=previous,
        timeout=timeout_ms,
    )
    return int(handle.json_value())


def transcript(page: Page) -> list[tuple[str, str]]:
    """(role, text) of every message bubble, in page order."""
    rows = page.eval_on_selector_all(
        "#messages > li.msg",
        "els => els.map(el => [el.dataset.role, el.querySelector('.body').innerText.trim()])",
    )
    return [(str(role), str(text)) for role, text in rows]


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


# Replaces the page's WebSocket with one the test scripts: it opens at once, records the frames
# the page sends, and delivers whatever events (and close codes) the test hands it.
FAKE_SOCKET_JS = """
window.__sockets = [];
class FakeSocket {
  constructor(url) {
    this.url = url;
    this.readyState = 0;
    this.sent = [];
    window.__sockets.push(this);
    setTimeout(() => { this.readyState = 1; if (this.onopen) this.onopen({}); }, 0);
  }
  send(data) { this.sent.push(JSON.parse(data)); }
  close() { this.readyState = 3; }
  deliver(event) { if (this.onmessage) this.onmessage({data: JSON.stringify(event)}); }
  serverClose(code) { this.readyState = 3; if (this.onclose) this.onclose({code}); }
}
Object.assign(FakeSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
window.WebSocket = FakeSocket;
"""


def deliver(page: Page, *events: dict[str, Any]) -> None:
    """Hand events to the page's (fake) socket, in this order."""
    page.evaluate("events => events.forEach(e => window.__sockets.at(-1).deliver(e))", list(events))


def frames_sent(page: Page, socket_index: int = -1) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = page.evaluate("i => window.__sockets.at(i).sent", socket_index)
    return frames


def admin_log_in(page: Page, stack: LiveStack, username: str, next_path: str) -> None:
    """Through admin's own login form."""
    page.goto(f"{stack.http_url}/admin/login/?next={next_path}")
    page.locator("#id_username").fill(username)
    page.locator("#id_password").fill(PASSWORD)
    page.locator('input[type="submit"]').click()
    page.wait_for_url(f"{stack.http_url}{next_path}")
