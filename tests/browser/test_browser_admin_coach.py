"""The coach's review pages in a real browser: Debian's Chromium, driven by Playwright's sync
API, against the live stack's Daphne serving admin. A coach logs in, opens the review queue
and a session, sees the timeline chart and the conflicts, annotates a turn and opens the
coachee overview. Screenshots go to test-output/screenshots/admin-coach-*.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from agents.models import Annotation
from tests.support.browser import SCREENSHOTS, admin_log_in
from tests.support.conversations import Conversation, build_conversation
from tests.support.people import make_coach
from tests.support.stack import LiveStack

pytestmark = [
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(180),
]

SERVES = "static/admin_review/review.css"
VIEWPORT = {"width": 1280, "height": 900}


def shot(page: Page, name: str, *, full_page: bool = False) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"admin-coach-{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


@pytest.fixture
def data(seeded_tx: None) -> dict[str, Any]:
    kim = make_coach("coach_kim")
    lee = make_coach("coach_lee")
    ana = build_conversation("ana_mk", "MKANA", coach=kim, sessions=2)
    ben = build_conversation("ben_mk", "MKBEN", coach=lee)
    return {"kim": kim, "ana": ana, "ben": ben}


def test_a_coach_reviews_a_session_from_the_queue(
    context: BrowserContext, live_stack: LiveStack, data: dict[str, Any]
) -> None:
    ana: Conversation = data["ana"]
    ben: Conversation = data["ben"]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    admin_log_in(page, live_stack, "coach_kim", "/admin/agents/turn/review-queue/")

    # The queue: escalated, degraded and flagged turns of the coach's own coachees, oldest first.
    rows = page.locator("#review-queue tbody tr")
    expect(rows).to_have_count(4)
    expected = [t.pk for t in ana.turns if t.escalation != "none" or t.degraded or t.flagged]
    assert [int(r.get_attribute("data-turn") or 0) for r in rows.all()] == expected
    expect(page.locator("#review-queue")).not_to_contain_text("MKBEN")
    expect(rows.first).to_contain_text("Escalation: Refer")
    expect(rows.nth(1)).to_contain_text("Degraded: Persona missing")
    assert not any(str(t.pk) == r.get_attribute("data-turn") for t in ben.turns for r in rows.all())
    shot(page, "1-queue")

    # Open the oldest: the session review, scrolled to that turn, with the turn expanded.
    rows.first.get_by_role("link", name="Review").click()
    turn = ana.turns[0]
    page.wait_for_url(f"**/admin/agents/coachingsession/{turn.session_id}/review/?turn={turn.pk}#turn-{turn.pk}")
    item = page.locator(f"#turn-{turn.pk}")
    details = item.locator("details.turn-details")
    expect(details).to_have_attribute("open", "")
    expect(item.locator(".msg-synth .body strong")).to_have_text("Full answer")

    # The timeline: an SVG chart with a bar per agent run, longer runs drawn wider.
    chart = item.locator("svg.timeline-chart")
    expect(chart).to_be_visible()
    chart.scroll_into_view_if_needed()
    bars = chart.locator("g.run rect.bar")
    expect(bars).to_have_count(9)
    box_persona = chart.locator('g.run[data-agent="persona"] rect.bar').bounding_box()
    box_stability = chart.locator('g.run[data-agent="stability"] rect.bar').bounding_box()
    assert box_persona
    assert box_stability
    assert box_stability["width"] / box_persona["width"] == pytest.approx(4000 / 3000, rel=0.03)
    assert box_stability["x"] == pytest.approx(box_persona["x"], abs=0.5)  # they started together
    shot(page, "2-session-timeline")

    # The conflicts, each with the rule that decided it.
    conflicts = item.locator("table.conflicts tbody tr")
    expect(conflicts).to_have_count(3)
    conflicts.first.scroll_into_view_if_needed()
    expect(item.locator("table.conflicts")).to_contain_text("A move Stability blocks is dropped")
    expect(item.locator("table.conflicts")).to_contain_text("A high risk overrides a pushing strategy")
    expect(item.locator("table.critic-rounds")).to_contain_text("rejected")
    shot(page, "3-session-conflicts")
    item.locator("svg.ocean-chart").scroll_into_view_if_needed()
    expect(item.locator("table.risks")).to_contain_text("Burnout at work MKANA")
    shot(page, "4-session-agents")
    shot(page, "5-session-full", full_page=True)

    # A collapsed turn opens with a click and shows its own chart.
    calm = ana.turns[2]
    calm_details = page.locator(f"#turn-{calm.pk} details.turn-details")
    expect(calm_details.locator("svg.timeline-chart")).to_be_hidden()
    calm_details.locator("> summary").click()
    expect(calm_details.locator("svg.timeline-chart")).to_be_visible()
    expect(calm_details.locator("p.no-conflicts")).to_be_visible()

    # Annotate: rate the full answer and leave a note.
    form = calm_details.locator("form.annotate-form")
    form.scroll_into_view_if_needed()
    form.locator('select[name="rating"]').select_option("5")
    form.locator('textarea[name="note"]').fill("Kind and concrete.")
    form.get_by_role("button", name="Save annotation").click()
    page.wait_for_url(f"**/review/?turn={calm.pk}#turn-{calm.pk}")
    expect(page.locator(".messagelist")).to_contain_text(f"Your annotation on turn {calm.pk} is saved.")
    expect(page.locator(f"#turn-{calm.pk} .annotation")).to_contain_text("rated 5/5")
    annotation = Annotation.objects.get(turn=calm)
    assert (annotation.author_id, annotation.rating, annotation.note) == (data["kim"].pk, 5, "Kind and concrete.")

    # The coachee overview: OCEAN over sessions, predictions, the blackboard's history.
    page.get_by_role("link", name="Coachee overview: ana_mk").click()
    expect(page.locator("svg.trend-chart")).to_have_count(5)
    expect(page.locator('figure.trend[data-trait="openness"] circle.point')).to_have_count(2)
    expect(page.locator("#predictions tbody tr")).to_have_count(6)
    shot(page, "6-coachee-overview")
    page.locator("#blackboard").scroll_into_view_if_needed()
    shot(page, "7-blackboard-history")
    expect(page.locator("ol.versions > li")).to_have_count(6)
    page.locator("ol.versions > li").nth(2).get_by_role("button", name="Revert to v4").click()
    expect(page.locator(".messagelist")).to_contain_text("Reverted: v7 is a copy of v4. Nothing was deleted.")
    expect(page.locator("ol.versions > li")).to_have_count(7)
    expect(page.locator("ol.versions > li").first).to_contain_text("Reverted to v4 by coach_kim")

    # Another coach's coachee is not there for this coach.
    response = page.goto(f"{live_stack.http_url}/admin/agents/coachingsession/{ben.sessions[0].pk}/review/")
    assert response is not None
    assert response.status == 404
    assert "MKBEN" not in page.content()
    assert errors == []


def test_the_review_page_reads_well_on_a_phone(browser: Browser, live_stack: LiveStack, data: dict[str, Any]) -> None:
    ctx = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        page = ctx.new_page()
        ana: Conversation = data["ana"]
        turn = ana.turns[0]
        path = f"/admin/agents/coachingsession/{turn.session_id}/review/"
        admin_log_in(page, live_stack, "coach_kim", path)
        page.goto(f"{live_stack.http_url}{path}?turn={turn.pk}#turn-{turn.pk}")
        chart = page.locator(f"#turn-{turn.pk} svg.timeline-chart")
        expect(chart).to_be_visible()
        # The chart keeps a readable size and scrolls sideways inside its own box; the page
        # itself is no wider than the phone.
        box = chart.bounding_box()
        assert box is not None
        assert box["width"] >= 600
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        chart.scroll_into_view_if_needed()
        shot(page, "8-phone")
    finally:
        ctx.close()
