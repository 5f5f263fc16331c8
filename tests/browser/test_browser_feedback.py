"""Around each message in Chromium: times, Copy, thumbs on a full answer that reach the assigned
coach's review queue and session review, a confirmation before ending a session, the account
deletion button styled as dangerous, and a compact header on a 390 px phone. Screenshots in
test-output/screenshots/feedback-*.png."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from agents.models import AnswerFeedback, CoachingSession, SessionStatus, Turn
from agents.turns import sessions
from tests.support.browser import TURN_MS, admin_log_in, open_chat, screenshot, send, wait_turn_done
from tests.support.people import coachee_with_session, make_coach, make_coachee
from tests.support.stack import LiveStack

pytestmark = [
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(150),
]

PERMISSIONS = ["clipboard-read", "clipboard-write"]


def test_thumbs_down_with_a_comment_reaches_the_assigned_coach(
    context: BrowserContext, browser: Browser, live_stack: LiveStack, live_sim: Any
) -> None:
    user = make_coachee("tess")
    session_id = int(sessions.session_start(user_id=user.pk).pk)
    make_coach("coach_tom", coachees=[user])
    page, errors = open_chat(context, live_stack, "tess", session_id)
    send(page, "I skipped the gym again.")
    wait_turn_done(page)
    answer = page.locator("#messages li.msg-synth")
    expect(answer).to_have_count(1, timeout=TURN_MS)

    # Every message shows its time; Copy puts the text on the clipboard.
    for time in page.locator("#messages li.msg .msg-foot time").all():
        assert re.fullmatch(r"\d{1,2}:\d{2}(\s?[AP]M)?", time.inner_text().strip()), time.inner_text()
        assert time.get_attribute("datetime")
    answer.get_by_role("button", name="Copy Full answer").click()
    expect(answer.get_by_role("button", name="Copy Full answer")).to_have_text("Copied")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == answer.locator(".body").inner_text().strip()

    # Thumbs down, then a few words on why.
    down = answer.get_by_role("button", name="Not helpful")
    down.click()
    expect(down).to_have_attribute("aria-pressed", "true")
    answer.get_by_label("What was wrong? (optional, your coach reads it)").fill("It ignored that I was sick.")
    answer.get_by_role("button", name="Send").click()
    expect(answer.locator(".why-form")).to_have_text("Thank you. Your coach will see it.")
    screenshot(page, "feedback-thumbs-down")
    feedback = AnswerFeedback.objects.get(message__session_id=session_id)
    assert feedback.rating == AnswerFeedback.Rating.DOWN
    assert feedback.comment == "It ignored that I was sick."
    assert feedback.prompt_version is not None
    # Kept across a reload.
    page.reload()
    expect(page.locator("#messages li.msg-synth").get_by_role("button", name="Not helpful")).to_have_attribute(
        "aria-pressed", "true"
    )
    assert errors == []

    # A long flag reason, as the quality gate writes them, must not widen the queue.
    long_reason = "quality gate: " + "; ".join(f"meta_talk: the reply talks about the system ({n})" for n in range(4))
    Turn.objects.filter(session_id=session_id).update(flagged=True, flag_reason=long_reason[:200])

    # The assigned coach finds it in the queue by itself, and on the session review.
    coach_context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        coach = coach_context.new_page()
        admin_log_in(coach, live_stack, "coach_tom", "/admin/agents/turn/review-queue/?reason=feedback")
        row = coach.locator("#review-queue tbody tr")
        expect(row).to_have_count(1)
        expect(row).to_contain_text("Thumbs down from the coachee: “It ignored that I was sick.”")
        expect(row).to_contain_text("turn 1")
        screenshot(coach, "feedback-coach-queue")
        # The whole queue, long reasons and all, fits a 1,400 px window.
        coach.goto(f"{live_stack.http_url}/admin/agents/turn/review-queue/")
        expect(coach.locator("#review-queue tbody tr")).to_have_count(1)
        expect(coach.locator("#review-queue")).to_contain_text("meta_talk")
        assert coach.evaluate("document.documentElement.scrollWidth") <= 1400
        screenshot(coach, "feedback-coach-queue-all")
        coach.goto(f"{live_stack.http_url}/admin/agents/turn/review-queue/?reason=feedback")
        row.get_by_role("link", name="Review").click()
        expect(coach.locator('[data-feedback="down"]')).to_contain_text("It ignored that I was sick.")
        screenshot(coach, "feedback-coach-session")
    finally:
        coach_context.close()


def test_ending_a_session_asks_first(context: BrowserContext, live_stack: LiveStack) -> None:
    session_id = coachee_with_session("uma")
    page, errors = open_chat(context, live_stack, "uma", session_id)
    page.get_by_role("button", name="End session").click()
    dialog = page.get_by_role("dialog", name="End this session?")
    expect(dialog).to_be_visible()
    screenshot(page, "feedback-end-session-confirm")
    dialog.get_by_role("button", name="Keep talking").click()
    expect(dialog).to_be_hidden()
    assert CoachingSession.objects.get(pk=session_id).status == SessionStatus.OPEN
    page.get_by_role("button", name="End session").click()
    dialog.get_by_role("button", name="End session").click()
    expect(page.locator("#composer-note")).to_be_visible()
    assert CoachingSession.objects.get(pk=session_id).status == SessionStatus.ENDED
    assert errors == []


def test_the_account_deletion_button_looks_dangerous(context: BrowserContext, live_stack: LiveStack) -> None:
    session_id = coachee_with_session("val")
    page, _ = open_chat(context, live_stack, "val", session_id)
    page.goto(f"{live_stack.http_url}/account/")
    delete = page.get_by_role("button", name="Delete my account and data")
    assert delete.evaluate("b => getComputedStyle(b).backgroundColor") == "rgb(160, 16, 16)"  # --danger
    screenshot(page, "feedback-account-delete")


def test_on_a_phone_the_header_and_status_line_stay_compact(
    browser: Browser, live_stack: LiveStack, live_sim: Any
) -> None:
    # The turn must still be running when the status line is measured: with no model behind the
    # agents it ended degraded in 0.1 s, sometimes before the page showed it running.
    live_sim.configure(agents={"synth": {"ttft_ms": 3000}})
    phone = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    phone.set_default_timeout(10_000)
    try:
        session_id = coachee_with_session("wes")
        page, errors = open_chat(phone, live_stack, "wes", session_id)
        send(page, "A short question from the bus.")
        expect(page.locator("#status-line")).to_have_attribute("data-state", "running")
        # Everything above the conversation, and the status line below it, while a turn runs.
        chrome = page.evaluate(
            """() => {
                const list = document.getElementById('messages').getBoundingClientRect();
                const status = document.querySelector('.turn-bar').getBoundingClientRect();
                return list.top + status.height;
            }"""
        )
        screenshot(page, "feedback-phone-running")
        assert chrome <= 0.25 * 844, chrome
        wait_turn_done(page)
        assert errors == []
    finally:
        phone.close()
