"""The composer in Chromium: the character counter and its refusal over the limit, a visible
refusal of an empty send, and a message sent while a reply is still coming (queued, then sent
when the turn ends; Stop sends it at once). Screenshots in test-output/screenshots/composer-*."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import BrowserContext, expect

from agents.models import Message, Role, Turn, TurnStatus
from tests.support.browser import (
    FAKE_SOCKET_JS,
    TURN_MS,
    coach_text_longer_than,
    deliver,
    frames_sent,
    open_chat,
    screenshot,
    send,
    wait_turn_done,
)
from tests.support.people import coachee_with_session
from tests.support.stack import LiveStack

pytestmark = [
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(120),
]


def user_frames(page: Any) -> list[dict[str, Any]]:
    return [f for f in frames_sent(page) if f["type"] == "user.message"]


def test_an_over_length_message_is_counted_and_refused_whole(context: BrowserContext, live_stack: LiveStack) -> None:
    limit = settings.COACHING_MAX_MESSAGE_CHARS
    session_id = coachee_with_session("len")
    page, errors = open_chat(context, live_stack, "len", session_id)
    box = page.get_by_label("Your message")
    counter = page.locator("#char-count")
    expect(counter).to_have_text(f"0 / {limit:,}")

    # A 5,000-character paste ending mid-sentence: nothing is cut, in the box or anywhere.
    text = ("I keep putting off the hard conversation at work that I know I need to have. " * 70)[:5000]
    box.fill(text)
    assert len(box.input_value()) == 5000
    expect(counter).to_have_text(f"5,000 / {limit:,} · {5000 - limit:,} too many")
    expect(counter).to_have_attribute("data-state", "over")
    box.press("Enter")
    error = page.get_by_role("alert").filter(has_text="characters long")
    expect(error).to_have_text(
        f"Your message is 5,000 characters long; the limit is {limit:,}. Shorten it by {5000 - limit:,} "
        "characters, or split it into two messages. Nothing was sent."
    )
    expect(box).to_have_attribute("aria-invalid", "true")
    assert box.input_value() == text  # kept whole, to be shortened
    expect(page.locator("#messages li.msg-user")).to_have_count(0)
    screenshot(page, "composer-over-length")
    assert not Message.objects.filter(session_id=session_id).exists()

    # Shortened to the limit: the refusal goes, the message goes out whole.
    box.fill(text[:limit])
    expect(error).to_be_hidden()
    expect(counter).to_have_attribute("data-state", "near")
    box.press("Enter")
    expect(page.locator("#messages li.msg-user")).to_have_count(1)
    expect(page.locator("#messages li.msg-user:not(.pending)")).to_have_count(1, timeout=TURN_MS)
    stored = Message.objects.get(session_id=session_id, role=Role.USER)
    assert stored.text == text[:limit].strip()
    assert errors == []


def test_an_empty_send_says_why_nothing_was_sent(context: BrowserContext, live_stack: LiveStack) -> None:
    context.add_init_script(FAKE_SOCKET_JS)
    session_id = coachee_with_session("empty")
    page, errors = open_chat(context, live_stack, "empty", session_id)
    box = page.get_by_label("Your message")
    for blank in ["", "   \n ", "\u200b"]:  # zero-width space: the server takes it for empty too
        box.fill(blank)
        page.get_by_role("button", name="Send").click()
        expect(page.get_by_role("alert").filter(has_text="Write a message first")).to_be_visible()
    screenshot(page, "composer-empty")
    assert user_frames(page) == []
    box.fill("Now with words")
    expect(page.locator("#composer-error")).to_be_hidden()
    assert errors == []


def test_a_message_during_a_running_turn_is_queued_then_sent(context: BrowserContext, live_stack: LiveStack) -> None:
    """The page's side, with a scripted socket: queued while the turn runs, sent when it ends,
    and a refusal by the server (another tab's turn) puts it back in the queue."""
    context.add_init_script(FAKE_SOCKET_JS)
    session_id = coachee_with_session("queue")
    page, errors = open_chat(context, live_stack, "queue", session_id)
    send(page, "First thought")
    [first] = user_frames(page)
    accepted = {"type": "message.accepted", "seq": 1, "turn_id": 5, "message_id": 50}
    deliver(page, accepted | {"client_id": first["client_id"], "text": "First thought"})
    note = page.locator("#queue-note")
    expect(note).to_have_text("A reply is still coming. A message you send now waits until it is finished.")

    send(page, "Second thought")
    queued = page.locator("#messages li.msg-user.queued")
    expect(queued).to_have_count(1)
    expect(queued).to_contain_text("Queued · goes out when the current reply is finished")
    expect(note).to_contain_text("Your next message is queued and will be sent when it is finished")
    screenshot(page, "composer-queued")
    assert len(user_frames(page)) == 1  # nothing sent while the turn runs

    done = {"type": "turn.done", "seq": 2, "turn_id": 5, "status": "done", "degraded": False}
    deliver(page, done | {"flagged": False, "missing": []})
    expect(queued).to_have_count(0)
    frames = user_frames(page)
    assert [f["text"] for f in frames] == ["First thought", "Second thought"]
    second = frames[1]["client_id"]
    expect(page.locator(f'li[data-client-id="{second}"]')).to_have_class("msg msg-user pending")

    # The server still runs a turn this page has not heard of: back in the queue, and out
    # again when that turn ends.
    refusal = {"type": "error", "code": "turn_running", "detail": "A reply is still coming.", "turn_id": 6}
    deliver(page, refusal | {"client_id": second})
    expect(page.locator(f'li[data-client-id="{second}"].queued')).to_have_count(1)
    expect(page.locator("#notice")).to_be_hidden()  # not an error the coachee must act on
    deliver(page, done | {"seq": 3, "turn_id": 6, "flagged": False, "missing": []})
    expect(page.locator(f'li[data-client-id="{second}"].pending')).to_have_count(1)
    assert [f["client_id"] for f in user_frames(page)] == [first["client_id"], second, second]

    # Cancel puts a queued message back into the composer.
    deliver(page, accepted | {"seq": 4, "turn_id": 7, "message_id": 70, "client_id": second, "text": "Second thought"})
    send(page, "Third thought")
    page.locator("#messages li.msg-user.queued").get_by_role("button", name="Cancel").click()
    expect(page.locator("#messages li.msg-user.queued")).to_have_count(0)
    expect(page.get_by_label("Your message")).to_have_value("Third thought")
    assert len(user_frames(page)) == 3

    # A turn the crisis pre-gate answered holds nothing back: the waiting message goes out.
    send(page, "I am scared")
    expect(page.locator("#messages li.msg-user.queued")).to_have_count(1)
    deliver(page, {"type": "safety.notice", "seq": 5, "turn_id": 7, "level": "crisis", "resources": []})
    expect(page.locator("#messages li.msg-user.queued")).to_have_count(0)
    assert [f["text"] for f in user_frames(page)][-1] == "I am scared"
    assert errors == []


def test_a_second_message_waits_for_the_first_turn_which_ends_whole(
    context: BrowserContext, live_stack: LiveStack, live_sim: Any
) -> None:
    """Against the live stack: the first turn is not degraded by the second, which starts
    only once the first has ended; Stop sends a queued message at once."""
    live_sim.configure(agents={"coach": {"tokens_per_s": 25, "output_tokens": 80}})
    session_id = coachee_with_session("wait")
    page, errors = open_chat(context, live_stack, "wait", session_id)
    send(page, "I never start the report on time.")
    # A new session takes its name from the first message, without a reload.
    expect(page.locator("#chat-title")).to_have_text("I never start the report on time.")
    assert page.title() == "I never start the report on time. · Coaching"
    coach_text_longer_than(page, 0)
    send(page, "Also, my manager keeps moving the deadline.")
    expect(page.locator("#messages li.msg-user.queued")).to_have_count(1)
    expect(page.locator("#queue-note")).to_contain_text("A reply is still coming")
    screenshot(page, "composer-second-message-while-running")
    assert Turn.objects.filter(session_id=session_id).count() == 1

    # The first turn ends whole; then the queued message goes out and gets its own turn.
    expect(page.locator("#messages li.msg-user.queued")).to_have_count(0, timeout=TURN_MS)
    expect(page.locator("#messages li.msg-synth")).to_have_count(2, timeout=TURN_MS)
    wait_turn_done(page)
    turns = list(Turn.objects.filter(session_id=session_id).order_by("started_at"))
    assert [t.status for t in turns] == [TurnStatus.DONE, TurnStatus.DONE]
    assert [t.degraded for t in turns] == [False, False]
    assert turns[0].finished_at is not None
    assert turns[0].finished_at <= turns[1].started_at
    screenshot(page, "composer-second-message-answered")

    # Stop: the running turn ends now and the queued message goes out at once.
    live_sim.configure(agents={"synth": {"ttft_ms": 6000}})  # the turn runs on after Coach's reply
    send(page, "Tell me everything about deadlines.")
    expect(page.locator('#messages li.msg-coach[data-status="complete"]')).to_have_count(3, timeout=TURN_MS)
    expect(page.locator("#status-line")).to_have_attribute("data-state", "running")
    send(page, "Actually, stop: one question first.")
    expect(page.locator("#messages li.msg-user.queued")).to_have_count(1)
    page.get_by_role("button", name="Stop").click()
    expect(page.locator("#messages li.msg-user.queued")).to_have_count(0)
    # The stopped turn gets no full answer; the queued message's turn does.
    expect(page.locator("#messages li.msg-synth")).to_have_count(3, timeout=TURN_MS)
    wait_turn_done(page)
    statuses = list(Turn.objects.filter(session_id=session_id).order_by("started_at").values_list("status", flat=True))
    assert statuses == [TurnStatus.DONE, TurnStatus.DONE, TurnStatus.STOPPED, TurnStatus.DONE]
    assert errors == []
