"""The chat page in a real browser: Debian's Chromium, driven by Playwright's sync API, against
the live stack (Daphne and a Celery worker) and the simulated model server."""

from __future__ import annotations

import time
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, expect

from agents.models import Message, Role, SessionEvent, Turn, TurnStatus
from agents.turns import event_log
from tests.support.browser import (
    FAKE_SOCKET_JS,
    TURN_MS,
    coach_text_longer_than,
    deliver,
    frames_sent,
    log_in,
    off_loop,
    open_chat,
    open_second_tab,
    screenshot,
    send,
    session_path,
    transcript,
    wait_turn_done,
)
from tests.support.config import point_agents_at
from tests.support.people import coachee_with_session
from tests.support.stack import LiveStack

pytestmark = [
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(120),
]

PLAIN_SYNTH = {
    "reply": "Pick one small step for tomorrow morning, and tell me how it went.",
    "moves_used": [],
    "signals_used": [],
    "signals_missing": [],
}


def messages_of(session_id: int, role: str) -> list[Message]:
    return list(Message.objects.filter(session_id=session_id, role=role).order_by("seq"))


def test_a_turn_streams_then_the_full_answer_attaches(
    context: BrowserContext, live_stack: LiveStack, live_sim: Any
) -> None:
    live_sim.configure(agents={"coach": {"tokens_per_s": 20, "output_tokens": 60}})
    session_id = coachee_with_session("ana")
    page, errors = open_chat(context, live_stack, "ana", session_id)
    box = page.get_by_label("Your message")

    # Shift+Enter is a new line, not a send.
    box.fill("I keep planning to run")
    box.press("Shift+Enter")
    box.press_sequentially("and never do.")
    assert box.input_value() == "I keep planning to run\nand never do."
    expect(page.locator("#messages li.msg-user")).to_have_count(0)
    box.press("Enter")
    expect(box).to_have_value("")
    user = page.locator("#messages li.msg-user")
    expect(user).to_have_count(1)
    expect(user.locator(".body")).to_have_text("I keep planning to run\nand never do.")

    # Coach streams: its text grows while the bubble is still streaming.
    first = coach_text_longer_than(page, 0)
    expect(page.locator("#status-line")).to_have_attribute("data-state", "running")
    screenshot(page, "1-streaming")
    second = coach_text_longer_than(page, first)
    assert 0 < first < second

    # The turn can end before the Coach stream does (Synth is quick here): wait for both.
    expect(page.locator("#messages li.msg-coach")).to_have_attribute("data-status", "complete", timeout=TURN_MS)
    wait_turn_done(page)
    screenshot(page, "2-done")
    coach = messages_of(session_id, Role.COACH)[0]
    synth = messages_of(session_id, Role.SYNTH)[0]
    assert page.locator("#messages li.msg-coach .body").text_content() == coach.text
    # The full answer sits right under the reply it completes, labelled as such.
    attached = page.locator("#messages li.msg-coach + li.msg-synth.attached")
    expect(attached).to_have_attribute("data-completes", str(coach.pk))
    expect(attached.locator(".who")).to_have_text("Full answer")
    # Every agent of the pipeline reported done, in pipeline order.
    agents = page.locator("#status-line .agent")
    expect(agents).to_have_count(5)
    assert [a.get_attribute("data-agent") for a in agents.all()] == [
        "shadow",
        "persona",
        "plasticity",
        "stability",
        "synth",
    ]
    expect(page.locator('#status-line .agent[data-state="done"]')).to_have_count(5)
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    assert synth.text

    # Phone width: nothing wider than the screen, the composer reachable.
    page.set_viewport_size({"width": 390, "height": 844})
    expect(page.get_by_role("button", name="Send")).to_be_in_viewport()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "3-phone")
    assert errors == []


def test_a_connection_cut_mid_stream_loses_nothing_and_repeats_nothing(
    context: BrowserContext, live_stack: LiveStack, live_sim: Any
) -> None:
    live_sim.configure(agents={"coach": {"tokens_per_s": 20, "output_tokens": 80}, "synth": {"script": [PLAIN_SYNTH]}})
    session_id = coachee_with_session("ben")
    page, errors = open_chat(context, live_stack, "ben", session_id)
    sockets: list[Any] = []
    page.on("websocket", lambda ws: sockets.append(ws))

    send(page, "Help me keep going.")
    at_cut = coach_text_longer_than(page, 5)
    off_loop(event_log.session_sockets_close, session_id=session_id)  # close code 4000
    expect(page.locator("#messages li.msg-coach")).to_have_attribute("data-status", "complete", timeout=TURN_MS)
    wait_turn_done(page)

    assert len(sockets) >= 1, "the page did not open a new socket after the server closed the old one"
    coach = messages_of(session_id, Role.COACH)
    synth = messages_of(session_id, Role.SYNTH)
    assert len(coach) == len(synth) == 1
    assert at_cut < len(coach[0].text), "the cut did not happen mid-stream"
    expect(page.locator("#messages li.msg-user")).to_have_count(1)
    expect(page.locator("#messages li.msg-coach")).to_have_count(1)
    expect(page.locator("#messages li.msg-synth")).to_have_count(1)
    assert page.locator("#messages li.msg-coach .body").text_content() == coach[0].text
    expect(page.locator("#messages li.msg-synth .body")).to_have_text(PLAIN_SYNTH["reply"])
    expect(page.locator("#connection")).to_have_attribute("data-state", "open")
    assert errors == []


def test_two_tabs_show_the_same_conversation(context: BrowserContext, live_stack: LiveStack, live_sim: Any) -> None:
    session_id = coachee_with_session("cai")
    first, first_errors = open_chat(context, live_stack, "cai", session_id)
    second, second_errors = open_second_tab(context, live_stack, session_id)

    send(first, "A message from the first tab.")
    wait_turn_done(first)
    wait_turn_done(second)
    send(second, "And one from the second tab.")
    for page in (first, second):
        expect(page.locator("#messages li.msg-synth")).to_have_count(2, timeout=TURN_MS)
        wait_turn_done(page)
        expect(page.locator("#messages li.pending")).to_have_count(0)

    seen = transcript(first)
    assert [role for role, _ in seen] == ["user", "coach", "synth", "user", "coach", "synth"]
    assert seen[0][1] == "A message from the first tab."
    assert seen[3][1] == "And one from the second tab."
    assert transcript(second) == seen
    # The page the server renders on a reload shows the same conversation.
    second.reload()
    expect(second.locator("#connection")).to_have_attribute("data-state", "open")
    assert transcript(second) == seen
    assert first_errors == second_errors == []


def test_a_message_written_offline_arrives_exactly_once(
    context: BrowserContext, live_stack: LiveStack, live_sim: Any
) -> None:
    session_id = coachee_with_session("dee")
    page, errors = open_chat(context, live_stack, "dee", session_id)
    text = "Written on the train without signal."

    context.set_offline(True)
    off_loop(event_log.session_sockets_close, session_id=session_id)  # in case the socket survived
    expect(page.locator("#connection")).to_have_attribute("data-state", "offline")
    send(page, text)
    pending = page.locator("#messages li.msg-user.pending")
    expect(pending).to_have_count(1)
    stored = page.evaluate(f"sessionStorage.getItem('coaching-outbox-{session_id}')")
    assert stored is not None
    assert text in stored
    time.sleep(0.5)  # the message must not slip out while offline
    assert not Message.objects.filter(session_id=session_id, role=Role.USER).exists()

    context.set_offline(False)
    expect(pending).to_have_count(0)
    expect(page.locator("#messages li.msg-user")).to_have_count(1)
    wait_turn_done(page)
    assert Message.objects.filter(session_id=session_id, role=Role.USER, text=text).count() == 1
    assert Message.objects.filter(session_id=session_id, role=Role.USER).count() == 1
    assert page.evaluate(f"sessionStorage.getItem('coaching-outbox-{session_id}')") is None
    assert errors == []


def test_model_output_is_shown_inert(context: BrowserContext, live_stack: LiveStack, live_sim: Any) -> None:
    hostile = '<script>window.__pwned=1</script> <img src=x onerror="window.__pwned=2">'
    live_sim.configure(
        agents={
            # Every Coach call: a turn may call Coach twice (an early request the accept does not keep).
            "coach": {"script": [f"Before {hostile} after."], "repeat_last": True},
            "synth": {"script": [{**PLAIN_SYNTH, "reply": f"A **bold** answer. {hostile}"}]},
        }
    )
    session_id = coachee_with_session("eve")
    page, errors = open_chat(context, live_stack, "eve", session_id)
    send(page, "Show me something.")
    wait_turn_done(page)

    def assert_inert() -> None:
        expect(page.locator("#messages li.msg-synth .body strong")).to_have_text("bold")  # HTML where it is due
        assert page.evaluate("window.__pwned") is None
        assert page.locator("#messages script").count() == 0
        assert page.locator("#messages img[onerror]").count() == 0
        assert page.locator("#messages img").count() == 0
        coach_text = page.locator("#messages li.msg-coach .body").text_content() or ""
        assert "<script>window.__pwned=1</script>" in coach_text

    assert_inert()
    page.reload()  # the same transcript, rendered by the server this time
    expect(page.locator("#connection")).to_have_attribute("data-state", "open")
    assert_inert()
    assert errors == []


def test_stop_ends_the_stream_and_the_turn(context: BrowserContext, live_stack: LiveStack, live_sim: Any) -> None:
    live_sim.configure(agents={"coach": {"tokens_per_s": 10, "output_tokens": 200}})
    session_id = coachee_with_session("fay")
    page, errors = open_chat(context, live_stack, "fay", session_id)
    send(page, "Tell me everything.")
    coach_text_longer_than(page, 0)
    page.get_by_role("button", name="Stop").click()

    wait_turn_done(page, "stopped")
    expect(page.locator("#status-line")).to_contain_text("Stopped")
    coach = page.locator("#messages li.msg-coach")
    expect(coach).to_have_attribute("data-status", "stopped")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    turn = Turn.objects.get(session_id=session_id)
    assert turn.status == TurnStatus.STOPPED
    stopped_at = len(coach.locator(".body").text_content() or "")
    time.sleep(1.5)  # nothing more may arrive: no growth, no full answer
    assert len(coach.locator(".body").text_content() or "") == stopped_at
    assert messages_of(session_id, Role.COACH)[0].text == coach.locator(".body").text_content()
    expect(page.locator("#messages li.msg-synth")).to_have_count(0)
    assert not Message.objects.filter(session_id=session_id, role=Role.SYNTH).exists()
    assert errors == []


def test_a_degraded_turn_offers_retry_as_a_new_message(
    context: BrowserContext, live_stack: LiveStack, live_sim: Any
) -> None:
    live_sim.configure(agents={"persona": {"fault": "invalid_json", "fault_times": 2}})
    session_id = coachee_with_session("gil")
    page, errors = open_chat(context, live_stack, "gil", session_id)
    send(page, "Why do I stall?")
    wait_turn_done(page)
    expect(page.locator("#status-line")).to_have_attribute("data-degraded", "true")
    expect(page.locator('#status-line .agent[data-agent="persona"]')).to_have_attribute("data-state", "failed")
    notice = page.get_by_role("alert").filter(has_text="could not")
    expect(notice).to_contain_text("Persona")
    screenshot(page, "4-degraded")

    page.get_by_role("button", name="Retry").click()
    expect(page.locator("#notice")).to_be_hidden()
    expect(page.locator("#messages li.msg-user")).to_have_count(2)
    expect(page.locator("#messages li.msg-synth")).to_have_count(2, timeout=TURN_MS)
    wait_turn_done(page)
    resent = messages_of(session_id, Role.USER)
    assert [m.text for m in resent] == ["Why do I stall?", "Why do I stall?"]
    assert resent[0].client_id != resent[1].client_id
    assert Turn.objects.filter(session_id=session_id).count() == 2
    assert errors == []


def test_crisis_resources_and_the_end_of_a_session(context: BrowserContext, live_stack: LiveStack) -> None:
    session_id = coachee_with_session("ida")
    page, errors = open_chat(context, live_stack, "ida", session_id)
    other_tab, other_errors = open_second_tab(context, live_stack, session_id)
    resources = [
        {"name": "Crisis line", "contact": "+1 555 0100", "url": "https://help.example.org/now", "description": "24/7"},
        {"name": "Text line", "contact": "Text HOME to 555", "url": "javascript:window.__pwned=3", "description": ""},
    ]
    payload = {"turn_id": 1, "level": "crisis", "resources": resources}
    off_loop(event_log.event_emit, session_id=session_id, type="safety.notice", payload=payload)

    card = page.locator("#messages .safety-card")
    expect(card).to_have_attribute("role", "alert")
    expect(card.locator("li.resource")).to_have_count(2)
    expect(card.locator("li.resource").first).to_contain_text("Crisis line")
    link = card.locator("a.resource-url")
    expect(link).to_have_count(1)  # the javascript: address is not made a link
    expect(link).to_have_attribute("href", "https://help.example.org/now")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    expect(card.locator('a[href="tel:+15550100"]')).to_have_count(1)
    screenshot(page, "5-safety")

    # Ending the session in one tab disables the composer in the other one at once.
    page.get_by_role("button", name="End session").click()
    page.get_by_role("dialog", name="End this session?").get_by_role("button", name="End session").click()
    expect(page.get_by_label("Your message")).to_be_disabled()
    expect(other_tab.get_by_label("Your message")).to_be_disabled()
    expect(other_tab.locator("#composer-note")).to_contain_text("ended")
    expect(other_tab.get_by_role("button", name="Send")).to_be_disabled()
    assert page.evaluate("window.__pwned") is None
    assert errors == other_errors == []


def test_crisis_language_shows_the_resources_card_with_every_model_down(
    context: BrowserContext, live_stack: LiveStack, live_sim: Any
) -> None:
    point_agents_at("http://127.0.0.1:9/v1")  # nothing listens there: no model can answer
    session_id = coachee_with_session("ivy")
    page, errors = open_chat(context, live_stack, "ivy", session_id)
    send(page, "I don't want to live anymore")
    card = page.locator("#messages .safety-card")
    expect(card).to_be_visible(timeout=2_000)  # the pre-gate answers at once, with no model
    expect(card).to_contain_text("988")  # the seeded resources of the session's locale (en)
    expect(page.locator("#messages li.msg-coach")).to_contain_text("emergency", timeout=2_000)
    screenshot(page, "6-crisis-pregate")
    turn = Turn.objects.get(session_id=session_id)
    assert turn.flagged is True
    assert turn.escalation == "crisis"
    assert errors == []


def test_events_apply_in_seq_order_exactly_once(context: BrowserContext, live_stack: LiveStack) -> None:
    """The page's own ordering rules, with a scripted socket: the live stack cannot be made to
    reorder, repeat or drop events on demand."""
    context.add_init_script(FAKE_SOCKET_JS)
    session_id = coachee_with_session("jo")
    page, errors = open_chat(context, live_stack, "jo", session_id)
    resumes = "i => window.__sockets.at(i).sent.filter(f => f.type === 'resume').map(f => f.after_seq)"
    assert frames_sent(page) == [{"type": "resume", "after_seq": 0}]
    turn, user_id, coach_id, synth_id = 7, 70, 71, 72

    accepted = {"type": "message.accepted", "seq": 1, "turn_id": turn, "message_id": user_id}
    accepted |= {"client_id": "other-tab", "text": "From the other tab"}
    started = {"type": "coach.started", "seq": 2, "turn_id": turn, "message_id": coach_id}
    # Out of order and twice: applied once, in order.
    deliver(page, started, accepted, started, accepted)
    expect(page.locator("#messages li.msg-user")).to_have_count(1)
    expect(page.locator("#messages li.msg-coach")).to_have_count(1)
    assert transcript(page)[0] == ("user", "From the other tab")

    def delta(offset: int, text: str) -> dict[str, Any]:
        return {"type": "coach.delta", "turn_id": turn, "message_id": coach_id, "offset": offset, "text": text}

    coach_body = page.locator("#messages li.msg-coach .body")
    deliver(page, delta(0, "Hello"), delta(3, "lo there"), delta(0, "Hel"))  # overlaps are dropped
    expect(coach_body).to_have_text("Hello there")
    deliver(page, delta(17, "nd."))  # a gap: held back until it is filled
    expect(coach_body).to_have_text("Hello there")
    snapshot = {"type": "coach.snapshot", "turn_id": turn, "message_id": coach_id, "text": "Hello there, frie"}
    deliver(page, snapshot)
    expect(coach_body).to_have_text("Hello there, friend.")

    def status(seq: int, agent: str, state: str, ms: int | None = None) -> dict[str, Any]:
        return {"type": "agent.status", "seq": seq, "turn_id": turn, "agent": agent, "state": state, "ms": ms}

    # A gap filled at once: no resume.
    deliver(page, status(4, "shadow", "succeeded", 1200), status(3, "shadow", "started"))
    shadow = page.locator('#status-line .agent[data-agent="shadow"]')
    expect(shadow).to_have_attribute("data-state", "done")
    expect(shadow).to_contain_text("1.2 s")
    # A gap left open: after about a second the page asks for what it missed.
    started_at = time.monotonic()
    deliver(page, status(6, "persona", "succeeded", 300))
    page.wait_for_function(f"() => ({resumes})(-1).includes(4)", timeout=5000)
    assert time.monotonic() - started_at >= 0.8
    expect(page.locator('#status-line .agent[data-agent="persona"]')).to_have_attribute("data-state", "waiting")
    deliver(page, status(5, "persona", "started"), status(6, "persona", "succeeded", 300))
    expect(page.locator('#status-line .agent[data-agent="persona"]')).to_have_attribute("data-state", "done")

    done = {"type": "coach.done", "seq": 7, "turn_id": turn, "message_id": coach_id}
    done |= {"text": "Hello there, friend.", "status": "complete"}
    synth = {"type": "synth.done", "seq": 8, "turn_id": turn, "message_id": synth_id}
    synth |= {"completes_message_id": coach_id, "text": "Full *answer*", "html": "<p>Full <em>answer</em></p>"}
    synth |= {"fallback": False}
    turn_done = {"type": "turn.done", "seq": 9, "turn_id": turn, "status": "done", "degraded": False}
    turn_done |= {"flagged": False, "missing": []}
    future = {"type": "future.event", "seq": 10, "anything": True}  # unknown: ignored, but it takes its seq
    safety = {"type": "safety.notice", "seq": 11, "turn_id": turn, "level": "refer", "resources": []}
    deliver(page, turn_done, synth, done, delta(20, " More?"), synth, safety, future)
    expect(page.locator("#status-line")).to_have_attribute("data-state", "done")
    expect(coach_body).to_have_text("Hello there, friend.")  # nothing after coach.done
    expect(page.locator("#messages li.msg-synth")).to_have_count(1)
    expect(page.locator("#messages li.msg-coach + li.msg-synth .body em")).to_have_text("answer")
    expect(page.locator("#messages .safety-card")).to_have_count(1)

    # The page's own message, acknowledged twice (once late, with a seq it already has).
    send(page, "Mine")
    client_id = frames_sent(page)[-1]["client_id"]
    mine = {"type": "message.accepted", "seq": 12, "turn_id": 8, "message_id": 80, "client_id": client_id}
    mine |= {"text": "Mine"}
    deliver(page, mine, mine)
    expect(page.locator("#messages li.msg-user")).to_have_count(2)
    expect(page.locator("#messages li.pending")).to_have_count(0)

    # 4000: reconnect at once and resume from the last applied seq; 1006: back off, then retry.
    page.evaluate("window.__sockets.at(-1).serverClose(4000)")
    page.wait_for_function(f"() => window.__sockets.length === 2 && ({resumes})(1).includes(12)", timeout=2000)
    page.evaluate("window.__sockets.at(-1).serverClose(1006)")
    expect(page.locator("#connection")).to_have_attribute("data-state", "reconnecting")
    page.wait_for_function("() => window.__sockets.length === 3", timeout=3000)
    expect(page.locator("#connection")).to_have_attribute("data-state", "open")
    # 4001 while our login is still good (the password was changed in this browser): reconnect.
    page.evaluate("window.__sockets.at(-1).serverClose(4001)")
    page.wait_for_function("() => window.__sockets.length === 4", timeout=3000)
    expect(page.locator("#connection")).to_have_attribute("data-state", "open")
    # 4403: refused for good.
    page.evaluate("window.__sockets.at(-1).serverClose(4403)")
    expect(page.locator("#connection")).to_contain_text("This session is not available to you")
    expect(page.get_by_label("Your message")).to_be_disabled()
    time.sleep(1.0)
    assert page.evaluate("window.__sockets.length") == 4
    # 4001 after a real logout: to the login page, and back here after logging in.
    other_tab, _ = open_second_tab(context, live_stack, session_id)
    context.clear_cookies()
    other_tab.evaluate("window.__sockets.at(-1).serverClose(4001)")
    other_tab.wait_for_url(f"**/accounts/login/?next=%2Fsessions%2F{session_id}%2F")
    assert errors == []


OPEN_SOCKET_JS = """url => new Promise(resolve => {
    const ws = new WebSocket(url);
    let opened = false;
    ws.onopen = () => { opened = true; };
    ws.onclose = event => resolve({code: event.code, opened});
})"""


def _other_coachees_socket(context: BrowserContext, live_stack: LiveStack) -> dict[str, Any]:
    own = coachee_with_session("gus")
    other = coachee_with_session("hal")
    page = context.new_page()
    log_in(page, live_stack, "gus", session_path(own))

    response = page.goto(f"{live_stack.http_url}{session_path(other)}")
    assert response is not None
    assert response.status == 404

    page.goto(f"{live_stack.http_url}{session_path(own)}")
    expect(page.locator("#connection")).to_have_attribute("data-state", "open")
    result: dict[str, Any] = page.evaluate(OPEN_SOCKET_JS, f"{live_stack.ws_url}/ws/sessions/{other}/")
    return result


def test_another_coachees_session_and_socket_are_refused(context: BrowserContext, live_stack: LiveStack) -> None:
    result = _other_coachees_socket(context, live_stack)
    assert result["code"] == 4403


def test_a_failing_model_server_shows_the_degraded_notice(
    context: BrowserContext, live_stack: LiveStack, live_sim: Any
) -> None:
    """A coachee whose model endpoint fails sees, in plain words, that their message is saved
    and the answer will be shorter; the end of the turn adds to the notice, it does not replace it."""
    # Coach's stream fails (and the server keeps failing, so the breaker opens).
    live_sim.configure(default={"fault": "http_500"})
    session_id = coachee_with_session("dee")
    page, errors = open_chat(context, live_stack, "dee", session_id)
    send(page, "Why do I stall?")
    notice = page.locator("#notice")
    expect(notice).to_contain_text("unavailable", timeout=15_000)
    expect(notice).to_contain_text("saved")
    screenshot(page, "7-degraded-notice")
    wait_turn_done(page)
    expect(notice).to_contain_text("unavailable")
    expect(notice).to_contain_text("could not be prepared")
    assert SessionEvent.objects.filter(session_id=session_id, type="service.degraded").count() == 1
    assert errors == []
