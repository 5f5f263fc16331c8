"""The engine trial's turns: one coachee in Chromium (the latency figures), and coachees with
known risks over the chat WebSocket, several at once (the quality and safety figures).

Coachees are created through the ORM (import after `django.setup()`); nothing else here touches
the database while turns run: the turns are read back afterwards (trial_checks.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from playwright.sync_api import Page, expect, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from agents.turns import sessions
from benchmarks.load import Coachee, CoacheeSocket

DATA = Path(__file__).resolve().parent / "data"
BROWSER_TURNS = DATA / "browser_turns.json"
RISK_CONVERSATIONS = DATA / "risk_conversations.json"
# Debian's Chromium, never a downloaded browser, with the flags the browser tests use too.
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# A coachee reads the answer before writing again; it also lets Coach's stream end.
READING_PAUSE_S = 2.0
# A Coach reply may still be streaming after turn.done on a busy machine: wait this long for it.
COACH_LINGER_S = 30.0

# Armed before each send: records, in the page's own clock, when the Send button was clicked,
# when the new Coach bubble first showed text, and when a new full answer (Synth) appeared.
# A MutationObserver sees each change as it is made, so no polling interval is added.
ARM_TIMERS_JS = """() => {
  const list = document.querySelector('#messages');
  const coachBefore = list.querySelectorAll('li.msg-coach').length;
  const synthBefore = list.querySelectorAll('li.msg-synth').length;
  const t = window.__trial = {sent: null, first: null, full: null, streamed: ''};
  const check = () => {
    if (t.sent === null) return;
    const now = performance.now();
    const coaches = list.querySelectorAll('li.msg-coach');
    if (coaches.length > coachBefore) {
      const li = coaches[coaches.length - 1];
      const text = li.querySelector('.body').textContent;
      if (t.first === null && text.trim().length > 0) t.first = now - t.sent;
      // What was on screen while it streamed (a reply the gate withdraws at its end was seen).
      if (li.dataset.status === 'streaming' && text.length > t.streamed.length) t.streamed = text;
    }
    if (t.full === null && list.querySelectorAll('li.msg-synth').length > synthBefore) t.full = now - t.sent;
  };
  if (window.__trialObserver) window.__trialObserver.disconnect();  // the previous turn's
  const observer = window.__trialObserver = new MutationObserver(check);
  observer.observe(list, {childList: true, subtree: true, characterData: true, attributes: true});
  document.querySelector('#send-button').addEventListener(
    'click', () => { t.sent = performance.now(); }, {capture: true, once: true});
}"""
TURN_ENDED_JS = """() => {
  const state = document.querySelector('#status-line').dataset.state;
  const coaches = document.querySelectorAll('#messages li.msg-coach');
  const last = coaches[coaches.length - 1];
  return state !== 'running' && state !== 'idle' && !(last && last.dataset.status === 'streaming');
}"""


@dataclass
class TurnRecord:
    """One message sent, and what the trial saw of its turn."""

    phase: str  # "browser" or "risk"
    conversation: str
    index: int  # 1-based, within its conversation
    text: str
    session_id: int
    turn_id: int | None = None
    first_token_s: float | None = None  # from the send to Coach's first visible text
    full_answer_s: float | None = None  # from the send to Synth's answer (or the fallback) shown
    lost: bool = False  # no full answer within the wait
    coach_streamed: str = ""  # Coach's text as it streamed, before its end (and the gate's verdict)
    events: list[str] = field(default_factory=list)  # sockets: the event types of the turn, in order
    error: str = ""


@dataclass(frozen=True)
class Conversation:
    id: str
    locale: str
    risk: str
    watch: str
    turns: list[str]


def load_browser_turns() -> tuple[str, list[str]]:
    data = json.loads(BROWSER_TURNS.read_text())
    return str(data["locale"]), [str(t) for t in data["turns"]]


def load_conversations() -> list[Conversation]:
    data = json.loads(RISK_CONVERSATIONS.read_text())
    return [
        Conversation(c["id"], c["locale"], c["risk"], c["watch"], [str(t) for t in c["turns"]])
        for c in data["conversations"]
    ]


def risk_plan(conversations: list[Conversation], total: int) -> list[Conversation]:
    """The first `total` turns taken round-robin (turn 1 of each conversation, then turn 2, ...),
    so a short run still covers every conversation and a long one their later turns."""
    counts = [0] * len(conversations)
    taken = 0
    while taken < total and any(n < len(c.turns) for n, c in zip(counts, conversations, strict=True)):
        for i, conversation in enumerate(conversations):
            if taken < total and counts[i] < len(conversation.turns):
                counts[i] += 1
                taken += 1
    return [
        Conversation(c.id, c.locale, c.risk, c.watch, c.turns[:n])
        for c, n in zip(conversations, counts, strict=True)
        if n
    ]


# --- Coachees ---------------------------------------------------------------------------------


def new_coachee(username: str, locale: str, password: str | None = None) -> tuple[int, int]:
    """A new user with the chat language set, as /account/ would, and one open session:
    (user id, session id)."""
    user = get_user_model().objects.create_user(username=username, password=password)
    sessions.account_locale_set(user_id=user.pk, locale=locale)
    session = sessions.session_start(user_id=user.pk, locale=locale)
    return user.pk, session.pk


def session_cookie(user_id: int) -> str:
    """A logged-in browser's session cookie, without a password (no hashing, no login throttle)."""
    client = Client()
    client.force_login(get_user_model().objects.get(pk=user_id))
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


# --- Chromium: one coachee, turn after turn -----------------------------------------------------


def log_in(page: Page, http_url: str, username: str, password: str, session_id: int) -> None:
    """Through the real login form, as tests/browser_support.py does, onto the session's page."""
    next_path = f"/sessions/{session_id}/"
    page.goto(f"{http_url}/accounts/login/?next={next_path}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{http_url}{next_path}")
    expect(page.locator("#connection")).to_have_attribute("data-state", "open", timeout=30_000)


def browser_turn(page: Page, text: str, wait_s: float) -> tuple[float | None, float | None, bool, str]:
    """Send one message with the Send button; (first token s, full answer s, lost, what
    Coach's bubble showed while it streamed)."""
    page.evaluate(ARM_TIMERS_JS)
    page.get_by_label("Your message").fill(text)
    page.locator("#send-button").click()
    lost = False
    try:
        page.wait_for_function("() => window.__trial.full !== null", timeout=wait_s * 1000)
        # The next message is refused while a turn runs; Coach may still be streaming.
        page.wait_for_function(TURN_ENDED_JS, timeout=COACH_LINGER_S * 1000)
    except PlaywrightTimeout:
        lost = True
    timers = page.evaluate("() => window.__trial")

    def seconds(key: str) -> float | None:
        return None if timers.get(key) is None else round(float(timers[key]) / 1000.0, 3)

    return seconds("first"), seconds("full"), lost, str(timers.get("streamed") or "")


def run_browser_turns(
    http_url: str, *, username: str, password: str, session_id: int, texts: list[str], wait_s: float
) -> tuple[list[TurnRecord], list[str]]:
    """Each text in turn in one Chromium tab; the records and the page's errors."""
    records = []
    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1100, "height": 800}, locale="en-US")
            context.set_default_timeout(30_000)
            page = context.new_page()
            page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" and "chat:" in m.text else None)
            log_in(page, http_url, username, password, session_id)
            for index, text in enumerate(texts, start=1):
                first, full, lost, streamed = browser_turn(page, text, wait_s)
                record = TurnRecord("browser", "browser", index, text, session_id, None, first, full, lost, streamed)
                records.append(record)
                print(f"   browser turn {index}/{len(texts)}: {_timing(record)}", flush=True)
                if lost:
                    record.error = "no full answer within the wait; the browser turns stop here"
                    break
                page.wait_for_timeout(READING_PAUSE_S * 1000)
        finally:
            browser.close()
    return records, errors


# --- WebSockets: several coachees at once -----------------------------------------------------


def socket_turn(sock: CoacheeSocket, turn_id: int, sent_at: float, record: TurnRecord) -> None:
    """Fill in the record from the frames the socket received for this turn."""
    streamed = ""
    for at, event in sock.log:
        if event.get("turn_id") != turn_id:
            continue
        kind = str(event.get("type"))
        record.events.append(kind)
        text = str(event.get("text") or "")
        if kind in ("coach.delta", "coach.snapshot", "coach.done") and text and record.first_token_s is None:
            record.first_token_s = round(at - sent_at, 3)
        if kind == "coach.delta":
            offset = int(event.get("offset", 0))
            # Pieces overlap after a resume: keep what extends the text (as static/chat/order.js does).
            if offset <= len(streamed) and offset + len(text) > len(streamed):
                streamed += text[len(streamed) - offset :]
        elif kind == "coach.snapshot" and len(text) > len(streamed):
            streamed = text
        elif kind == "synth.done" and record.full_answer_s is None:
            record.full_answer_s = round(at - sent_at, 3)
        elif kind == "error":
            record.error = f"{event.get('code')}: {event.get('detail')}"
    record.coach_streamed = streamed


async def converse(
    http_url: str, conversation: Conversation, coachee: Coachee, wait_s: float, slots: asyncio.Semaphore
) -> list[TurnRecord]:
    """One coachee's conversation, turn after turn, on its own socket."""
    records = []
    async with slots:
        sock = CoacheeSocket(http_url, coachee)
        await sock.open()
        try:
            for index, text in enumerate(conversation.turns, start=1):
                client_id = f"trial-{conversation.id}-{index}-{time.time_ns()}"
                sent_at = await sock.send_message(client_id, text)
                turn_id = await sock.wait_turn(client_id, wait_s)
                record = TurnRecord("risk", conversation.id, index, text, coachee.session_id, turn_id)
                records.append(record)
                if turn_id is None:
                    record.lost = True
                    record.turn_id = sock.turn_id_of(client_id)
                    record.error = "no turn.done within the wait; this conversation stops here"
                    break
                try:
                    await asyncio.wait_for(sock.coach_finished(turn_id), COACH_LINGER_S)
                except TimeoutError:
                    record.error = "Coach's reply had not ended 30 s after turn.done"
                socket_turn(sock, turn_id, sent_at, record)
                print(f"   {conversation.id} turn {index}/{len(conversation.turns)}: {_timing(record)}", flush=True)
                await asyncio.sleep(READING_PAUSE_S)
        finally:
            await sock.close()
    return records


async def run_conversations(
    http_url: str, plan: list[tuple[Conversation, Coachee]], *, concurrency: int, wait_s: float
) -> list[TurnRecord]:
    slots = asyncio.Semaphore(max(1, concurrency))
    done = await asyncio.gather(*(converse(http_url, c, coachee, wait_s, slots) for c, coachee in plan))
    return [record for records in done for record in records]


def _timing(record: TurnRecord) -> str:
    def s(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f} s"

    lost = " (lost)" if record.lost else ""
    return f"first token {s(record.first_token_s)}, full answer {s(record.full_answer_s)}{lost}"
