"""The coach's admin: the session review (transcript, agents' outputs for people, arbitration,
critic gate, failures, timeline chart), the review queue, the coachee overview (OCEAN over
sessions, predictions, blackboard history and revert), annotations, CSV export and query counts.

`build_conversation` makes realistic data with the ORM (outputs that validate against the
agents' schemas, arbitration by the real rules); the authorization and browser tests use it too."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agents.memory import edits
from agents.models import (
    AgentRun,
    Annotation,
    BlackboardVersion,
    CoachingSession,
    Message,
    Role,
    RunStatus,
    Turn,
)
from agents.review import charts, decisions, export, labels
from agents.review.annotations import alarm_dismiss, annotation_add
from agents.review.overview import coachee_overview
from agents.roles.schemas import (
    PersonaOutput,
)
from tests.support.conversations import Conversation, build_conversation
from tests.support.people import PASSWORD, logged_in, make_coach, make_operator


@pytest.fixture
def coach(seeded: None) -> Any:
    return make_coach("coach_kim")


@pytest.fixture
def convo(coach: Any) -> Conversation:
    return build_conversation("ana_mk", "MKANA", coach=coach, sessions=2)


@pytest.fixture
def coach_client(coach: Any) -> Client:
    return logged_in(coach)


def review_url(session: CoachingSession, turn: Turn | None = None) -> str:
    url = reverse("admin:agents_coachingsession_review", args=[session.pk])
    return f"{url}?turn={turn.pk}" if turn else url


def text_of(html: str) -> str:
    """Visible text, roughly: tags dropped, whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_the_review_page_shows_the_transcript_and_each_turn_expandable(
    coach_client: Client, convo: Conversation
) -> None:
    session = convo.sessions[0]
    response = coach_client.get(review_url(session))
    assert response.status_code == 200
    html = response.content.decode()
    # Every message of the session, in order, and the Synth answer rendered from Markdown.
    turns = convo.turns[:3]
    positions = [html.index(f'id="turn-{t.pk}"') for t in turns]
    assert positions == sorted(positions)
    assert html.count('<details class="turn-details"') == 3
    assert "<strong>Full answer</strong> for you MKANA" in html
    assert "Quick thought for you MKANA" in html
    # Opened only for the turn asked for.
    assert html.count('<details class="turn-details" open>') == 0
    opened = coach_client.get(review_url(session, turns[1])).content.decode()
    assert opened.count('<details class="turn-details" open>') == 1
    assert opened.index('<details class="turn-details" open>') > opened.index(f'id="turn-{turns[1].pk}"')


def test_ocean_is_drawn_as_bars_with_confidence_bands(coach_client: Client, convo: Conversation) -> None:
    html = coach_client.get(review_url(convo.sessions[0])).content.decode()
    persona = convo.turns[0].agent_runs.get(agent="persona").parsed_output
    assert persona is not None
    assert html.count('<svg class="ocean-chart"') == 2  # the escalated and the calm turn; degraded has none
    for trait, expected in persona["ocean"].items():
        low = max(0, expected["score"] - expected["uncertainty"])
        high = min(100, expected["score"] + expected["uncertainty"])
        assert f'data-trait="{trait}" data-score="{expected["score"]}" data-low="{low}" data-high="{high}"' in html
    chart = charts.ocean_chart(PersonaOutput.model_validate(persona))
    openness = chart.rows[0]
    # The band spans score ± uncertainty on a 0-100 track, the marker sits at the score.
    assert float(openness.band_x) == pytest.approx(charts.OCEAN_TRACK_X + 52 * charts.OCEAN_TRACK_W / 100)
    assert float(openness.band_w) == pytest.approx(20 * charts.OCEAN_TRACK_W / 100)
    assert float(openness.score_x) + 1.5 == pytest.approx(charts.OCEAN_TRACK_X + 62 * charts.OCEAN_TRACK_W / 100)


def test_risks_are_a_table_with_severity_detectability_reversibility_and_priority(
    coach_client: Client, convo: Conversation
) -> None:
    html = coach_client.get(review_url(convo.sessions[0])).content.decode()
    table = html[html.index('<table class="risks">') : html.index("</table>", html.index('<table class="risks">'))]
    text = text_of(table)
    for header in ("Severity", "Detectability", "Reversibility", "Priority"):
        assert header in text
    # Highest priority first: 4·3·2 = 24 before 2·4·1 = 8; severity 4 is a high risk.
    assert text.index("Burnout at work MKANA") < text.index("Skipping meals MKANA")
    assert re.search(r"Burnout at work MKANA high .*4 .*3 .*2 .*24", text)
    assert '<tr class="high">' in table


def test_moves_are_shown_by_name_not_key(coach_client: Client, convo: Conversation) -> None:
    html = coach_client.get(review_url(convo.sessions[0])).content.decode()
    assert '<span class="move" title="direct_challenge">Direct challenge</span>' in html
    assert '<span class="move" title="tiny_next_step">Tiny next step</span>' in html
    # A move the catalog no longer has is shown by its key, marked as unknown.
    assert labels.moves_named(["gone_move"], labels.move_catalog())[0] == labels.MoveName(
        "gone_move", "gone_move", False
    )


def test_arbitration_escalation_and_critic_gate_are_shown(coach_client: Client, convo: Conversation) -> None:
    html = coach_client.get(review_url(convo.sessions[0])).content.decode()
    escalated = convo.turns[0]
    rules = list(escalated.conflicts.values_list("rule", flat=True))
    assert set(rules) == {"blocked_move_dropped", "high_risk_overrides_push", "escalation_changes_brief"}
    for rule in rules:
        assert f'<tr data-rule="{rule}">' in html
        assert decisions.RULE_LABELS[rule] in html
    # The conflict's claims are readable: the move by name, the risks with their scores.
    assert "Burnout at work MKANA (severity 4, detectability 3, reversibility 2, priority 24)" in html
    assert "The reply pointed the coachee to professional help." in html
    assert "Escalation: Refer" in html
    # Critic gate: round 1 rejected with its violation, round 2 passed.
    critic = html[html.index('<table class="critic-rounds">') :]
    critic = critic[: critic.index("</table>")]
    assert re.search(r"1 rejected yes unsafe: diagnosis MKANA 2 passed yes none", text_of(critic))
    assert "No conflicts: the specialists agreed." in html  # the calm turn


def test_failed_agents_are_shown_with_their_errors(coach_client: Client, convo: Conversation) -> None:
    html = coach_client.get(review_url(convo.sessions[0])).content.decode()
    section = html[html.index('<section class="panel failures">') :]
    section = text_of(section[: section.index("</section>")])
    assert "Synth worked without: Persona" in section
    assert "Persona failed after 2 attempts (3.1 s)" in section
    assert "timeout: no answer within 3.1 s MKANA" in section
    assert "ocean.openness: Field required" in section
    assert html.count('<section class="panel failures">') == 1  # only the degraded turn


def test_the_timeline_is_an_svg_chart_with_a_bar_per_run(coach_client: Client, convo: Conversation) -> None:
    html = coach_client.get(review_url(convo.sessions[0])).content.decode()
    turn = convo.turns[0]
    start = html.index(f'id="timeline-title-{turn.pk}"')
    svg = html[html.rindex("<svg", 0, start) : html.index("</svg>", start)]
    bars = re.findall(
        r'<g class="run agent-(\w+) status-(\w+)" data-agent="\w+" data-round="(\d)" data-status="\w+" '
        r'data-start-ms="(\d+)" data-duration-ms="(\d+)" data-width="([\d.]+)"',
        svg,
    )
    assert [(a, int(r)) for a, _, r, *_ in bars] == [
        ("coach", 1),
        ("shadow", 1),
        ("persona", 1),
        ("plasticity", 1),
        ("stability", 1),
        ("synth", 1),
        ("critic", 1),
        ("synth", 2),
        ("critic", 2),
    ]
    by_agent = {(a, int(r)): (int(s), int(d), float(w)) for a, _, r, s, d, w in bars}
    assert by_agent[("persona", 1)][:2] == (2400, 3000)
    assert by_agent[("stability", 1)][:2] == (2400, 4000)
    # Widths are proportional to durations.
    ratio = by_agent[("stability", 1)][2] / by_agent[("persona", 1)][2]
    assert ratio == pytest.approx(4000 / 3000, rel=0.01)
    # Tokens as a stacked bar beside each run, not a table of numbers.
    assert svg.count('class="tok-prompt"') == 9
    assert svg.count('class="tok-completion"') == 9
    assert "900 + 150" in svg
    assert "<table" not in svg
    assert 'class="marker"' in svg  # when the answer was delivered


def test_timeline_geometry() -> None:
    t0 = timezone.now()
    turn = Turn(pk=1, started_at=t0, finished_at=t0 + timedelta(milliseconds=5200))

    def run(agent: str, start: int, duration: int | None, status: str = RunStatus.SUCCEEDED) -> AgentRun:
        return AgentRun(
            agent=agent,
            round=1,
            status=status,
            started_at=t0 + timedelta(milliseconds=start),
            finished_at=None if duration is None else t0 + timedelta(milliseconds=start + duration),
            latency_ms=duration,
            prompt_tokens=100 if agent != "coach" else None,
            completion_tokens=50 if agent != "coach" else None,
        )

    runs = [run("synth", 3000, 2000), run("shadow", 0, 1000), run("persona", 1000, 1500, RunStatus.FAILED)]
    tl = charts.timeline(turn, runs)
    assert [b.agent for b in tl.bars] == ["shadow", "persona", "synth"]  # by start
    assert tl.total_ms == 5200
    assert [t.label for t in tl.ticks] == ["0 s", "1 s", "2 s", "3 s", "4 s", "5 s", "6 s"]
    xs = [float(b.x) for b in tl.bars]
    assert xs[0] == tl.plot_x
    assert xs == sorted(xs)
    px_per_ms = tl.plot_w / 6000
    assert float(tl.bars[2].width) == pytest.approx(2000 * px_per_ms, abs=0.06)
    assert float(tl.bars[2].x) == pytest.approx(tl.plot_x + 3000 * px_per_ms, abs=0.06)
    assert tl.bars[1].status == "failed"
    assert tl.total_tokens == 450
    # A run still going is drawn to the latest end seen and says so.
    still = charts.timeline(turn, [run("shadow", 0, 1000), run("persona", 1000, None, RunStatus.RUNNING)])
    assert still.bars[1].duration_text.endswith("(running)")
    assert still.bars[1].duration_ms == 4200


def test_the_review_queue_lists_escalated_degraded_and_flagged_turns_oldest_first(
    coach_client: Client, convo: Conversation
) -> None:
    other_coach = make_coach("coach_lee")
    other = build_conversation("ben_mk", "MKBEN", coach=other_coach, start=timezone.now() - timedelta(days=10))
    calm = convo.turns[2]
    annotation_add(turn_id=convo.turns[5].pk, author_id=other_coach.pk, flagged=True)
    response = coach_client.get(reverse("admin:agents_turn_review_queue"))
    assert response.status_code == 200
    html = response.content.decode()
    listed = [int(t) for t in re.findall(r'<tr data-turn="(\d+)">', html)]
    expected = [
        t for t in convo.turns if t.escalation != "none" or t.degraded or t.flagged or t.pk == convo.turns[5].pk
    ]
    assert listed == [t.pk for t in sorted(expected, key=lambda t: t.started_at)]
    assert calm.pk not in listed
    assert convo.turns[5].pk in listed  # calm, but flagged by a coach
    assert "Flagged by a coach" in html
    assert "MKBEN" not in html
    assert not set(listed) & {t.pk for t in other.turns}
    # Filtered by reason.
    degraded = coach_client.get(reverse("admin:agents_turn_review_queue") + "?reason=degraded").content.decode()
    assert [int(t) for t in re.findall(r'<tr data-turn="(\d+)">', degraded)] == [convo.turns[1].pk, convo.turns[4].pk]
    # Each row opens the session review at that turn.
    first = convo.turns[0]
    assert f"{review_url(first.session, first)}#turn-{first.pk}" in html


def test_the_coachee_overview_shows_ocean_over_sessions_with_bands(coach_client: Client, convo: Conversation) -> None:
    url = reverse("admin:agents_coachingsession_coachee", args=[convo.coachee.pk])
    html = coach_client.get(url).content.decode()
    assert html.count('<figure class="trend"') == 5
    openness = html[html.index('data-trait="openness"') :]
    openness = openness[: openness.index("</figure>")]
    assert '<polygon class="band"' in openness
    assert '<polyline class="line"' in openness
    assert openness.count('<circle class="point"') == 2  # one reading per session
    assert "latest 72 ± 10" in openness  # session 2 shifted the scores by 10
    overview = coachee_overview(convo.coachee)
    trend = overview.trends[0]
    assert [p.score for p in trend.points] == [62, 72]
    # The band polygon goes along score + uncertainty, then back along score - uncertainty.
    ys = [float(pt.split(",")[1]) for pt in trend.band.split()]
    expected = [charts._trend_y(v) for v in (72, 82, 62, 52)]
    assert ys == pytest.approx(expected, abs=0.06)


def test_predictions_are_shown_next_to_what_happened_later(coach_client: Client, convo: Conversation) -> None:
    overview = coachee_overview(convo.coachee)
    assert len(overview.predictions) == 6
    first = overview.predictions[-1]  # oldest: made in session 1's first turn, 2-day window
    assert first.commitment == "Run on Monday morning MKANA"
    assert not first.window_open
    assert [m.session_id for m in first.later_messages] == [
        convo.sessions[0].pk,
        convo.sessions[0].pk,
        convo.sessions[1].pk,
    ]
    assert first.next_pattern == "avoidance (70%)"
    assert first.later_follow_through == [("Running", 40)]  # Persona's latest reading in the window
    assert first.status == "superseded"
    html = coach_client.get(reverse("admin:agents_coachingsession_coachee", args=[convo.coachee.pk])).content.decode()
    assert "What happened later" in html
    assert "window closed" in html


def test_the_blackboard_history_lists_every_version_with_its_source_turn(
    coach_client: Client, convo: Conversation
) -> None:
    html = coach_client.get(reverse("admin:agents_coachingsession_coachee", args=[convo.coachee.pk])).content.decode()
    versions = [int(v) for v in re.findall(r'<li class="version[^"]*" id="version-\d+" data-version="(\d+)"', html)]
    assert versions == [6, 5, 4, 3, 2, 1]
    for version in convo.versions:
        turn = version.source_turn
        assert turn is not None
        assert f"{review_url(turn.session, turn)}#turn-{turn.pk}" in html
    # Every version but the current one can be reverted.
    assert html.count('class="button revert"') == 5


def test_reverting_writes_a_new_version_equal_to_the_old_one_under_the_lock(
    coach_client: Client, coach: Any, convo: Conversation, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked: list[int] = []
    real_lock = edits.blackboard_lock_latest

    def spy(*, coachee_id: int) -> BlackboardVersion | None:
        locked.append(coachee_id)
        return real_lock(coachee_id=coachee_id)

    monkeypatch.setattr(edits, "blackboard_lock_latest", spy)
    target = convo.versions[1]
    before = {v.pk: (v.version, v.data) for v in BlackboardVersion.objects.filter(coachee=convo.coachee)}
    url = reverse("admin:agents_coachingsession_revert", args=[convo.coachee.pk, target.pk])
    response = coach_client.post(url)
    assert response.status_code == 302
    assert locked == [convo.coachee.pk]
    after = {v.pk: (v.version, v.data) for v in BlackboardVersion.objects.filter(coachee=convo.coachee)}
    assert {pk: after[pk] for pk in before} == before  # nothing changed or deleted
    (new_pk,) = set(after) - set(before)
    new = BlackboardVersion.objects.get(pk=new_pk)
    assert new.version == 7
    assert new.data == target.data
    assert new.edited_by_id == coach.pk
    assert new.source_turn_id is None
    html = coach_client.get(reverse("admin:agents_coachingsession_coachee", args=[convo.coachee.pk])).content.decode()
    assert "Reverted to v2 by coach_kim" in html
    # Reverting to the current version would change nothing and is refused.
    coach_client.post(reverse("admin:agents_coachingsession_revert", args=[convo.coachee.pk, new.pk]))
    assert BlackboardVersion.objects.filter(coachee=convo.coachee).count() == 7
    # A GET never reverts.
    assert coach_client.get(url).status_code == 405


def test_the_revert_action_needs_exactly_one_version(coach_client: Client, convo: Conversation) -> None:
    url = reverse("admin:agents_blackboardversion_changelist")
    two = [convo.versions[0].pk, convo.versions[1].pk]
    coach_client.post(url, {"action": "revert_to_version", "_selected_action": two})
    assert BlackboardVersion.objects.filter(coachee=convo.coachee).count() == 6
    coach_client.post(url, {"action": "revert_to_version", "_selected_action": [convo.versions[0].pk]})
    latest = BlackboardVersion.objects.filter(coachee=convo.coachee).order_by("-version").first()
    assert latest is not None
    assert latest.version == 7
    assert latest.data == convo.versions[0].data


def test_a_coach_rates_flags_and_notes_a_turn_on_the_review_page(
    coach_client: Client, coach: Any, convo: Conversation
) -> None:
    turn = convo.turns[2]
    url = reverse("admin:agents_coachingsession_annotate", args=[turn.session_id, turn.pk])
    response = coach_client.post(url, {"rating": "2", "flagged": "on", "note": "Too pushy for today."})
    assert response.status_code == 302
    assert response["Location"].endswith(f"?turn={turn.pk}#turn-{turn.pk}")
    annotation = Annotation.objects.get(turn=turn)
    assert (annotation.author_id, annotation.rating, annotation.flagged, annotation.note) == (
        coach.pk,
        2,
        True,
        "Too pushy for today.",
    )
    page = coach_client.get(review_url(turn.session, turn)).content.decode()
    assert "rated 2/5" in page
    assert "Too pushy for today." in page
    # An empty annotation is refused with a message.
    coach_client.post(url, {"rating": "", "note": "  "})
    assert Annotation.objects.filter(turn=turn).count() == 1
    # The flagged turn is now in the queue.
    queue = coach_client.get(reverse("admin:agents_turn_review_queue")).content.decode()
    assert f'<tr data-turn="{turn.pk}">' in queue


def test_the_flag_action_and_the_annotation_admin(coach_client: Client, coach: Any, convo: Conversation) -> None:
    calm = convo.turns[5]
    coach_client.post(
        reverse("admin:agents_turn_changelist"), {"action": "flag_for_review", "_selected_action": [calm.pk]}
    )
    assert Annotation.objects.filter(turn=calm, flagged=True, author=coach).count() == 1
    coach_client.post(
        reverse("admin:agents_turn_changelist"), {"action": "flag_for_review", "_selected_action": [calm.pk]}
    )
    assert Annotation.objects.filter(turn=calm, flagged=True, author=coach).count() == 1  # once per author
    add = coach_client.post(
        reverse("admin:agents_annotation_add"), {"turn": convo.turns[2].pk, "rating": "5", "note": ""}
    )
    assert add.status_code == 302, add.content.decode()[:2000]
    made = Annotation.objects.get(turn=convo.turns[2])
    assert made.author_id == coach.pk
    assert made.rating == 5
    # Another coach's annotation on the same coachee can be read, not changed.
    colleague = make_coach("coach_sam", coachees=[convo.coachee])
    theirs = Annotation.objects.create(turn=convo.turns[2], author=colleague, note="theirs")
    change = reverse("admin:agents_annotation_change", args=[theirs.pk])
    assert coach_client.get(change).status_code == 200
    coach_client.post(change, {"turn": convo.turns[2].pk, "note": "mine now"})
    theirs.refresh_from_db()
    assert theirs.note == "theirs"


def test_export_selected_as_csv(coach_client: Client, convo: Conversation, coach: Any) -> None:
    Message.objects.filter(pk=convo.turns[0].user_message_id).update(text="=HYPERLINK('x') MKANA")
    alarm_dismiss(turn_id=convo.turns[0].pk, author_id=coach.pk, note="Her sister's diet, not hers.")
    card = {"layer": "pattern", "pattern_id": 7, "locale": "en", "pattern": "end it all", "category": "suicide"}
    Turn.objects.filter(pk=convo.turns[1].pk).update(escalation="crisis", crisis_signal=card)
    response = coach_client.post(
        reverse("admin:agents_turn_changelist"),
        {"action": "export_csv", "_selected_action": [t.pk for t in convo.turns[:2]]},
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == export.TURN_EXPORT_HEADER
    assert [int(r[0]) for r in rows[1:]] == [convo.turns[0].pk, convo.turns[1].pk]
    assert rows[1][rows[0].index("coachee_message")] == "'=HYPERLINK('x') MKANA"  # never a formula
    assert rows[1][rows[0].index("escalation")] == "refer"
    # The false alarm a coach found, with who and why; the other turn has none.
    false_alarm = [rows[1][rows[0].index(c)] for c in ("false_alarm_by", "false_alarm_note")]
    assert false_alarm == [coach.get_username(), "Her sister's diet, not hers."]
    assert rows[1][rows[0].index("false_alarm_at")]
    assert "pattern #7 (en): end it all" in rows[2][rows[0].index("crisis_signal")]
    assert [rows[2][rows[0].index(c)] for c in ("false_alarm_by", "false_alarm_at", "false_alarm_note")] == ["", "", ""]
    sessions = coach_client.post(
        reverse("admin:agents_coachingsession_changelist"),
        {"action": "export_csv", "_selected_action": [s.pk for s in convo.sessions]},
    )
    rows = list(csv.reader(io.StringIO(sessions.content.decode())))
    assert rows[0] == export.SESSION_EXPORT_HEADER
    # The first session's second turn got the card above: two escalated turns there.
    assert [r[1:2] + r[6:] for r in rows[1:]] == [["ana_mk", "3", "2", "1", "1"], ["ana_mk", "3", "1", "1", "1"]]


def test_operators_see_no_conversation_models_and_superusers_see_all(seeded: None) -> None:
    ana = build_conversation("ana_mk", "MKANA")
    operator = make_operator("olga")
    index = logged_in(operator).get(reverse("admin:index")).content.decode()
    assert "Coaching sessions" not in index
    assert "Turns" not in index
    for name in ("coachingsession", "turn", "agentrun", "message", "blackboardversion", "conflict", "annotation"):
        assert logged_in(operator).get(reverse(f"admin:agents_{name}_changelist")).status_code == 403
    root = get_user_model().objects.create_superuser("root", password=PASSWORD)
    html = logged_in(root).get(reverse("admin:agents_turn_changelist")).content.decode()
    assert "MKANA" in html
    assert logged_in(root).get(review_url(ana.sessions[0])).status_code == 200


def test_the_app_index_links_coaches_to_the_review_pages(coach_client: Client, convo: Conversation) -> None:
    html = coach_client.get(reverse("admin:app_list", args=["agents"])).content.decode()
    assert reverse("admin:agents_turn_review_queue") in html
    assert reverse("admin:agents_coachingsession_coachees") in html
    coachees = coach_client.get(reverse("admin:agents_coachingsession_coachees")).content.decode()
    assert reverse("admin:agents_coachingsession_coachee", args=[convo.coachee.pk]) in coachees
    operator = logged_in(make_operator("olga")).get(reverse("admin:index")).content.decode()
    assert reverse("admin:agents_turn_review_queue") not in operator


def test_coach_permissions_come_from_the_roles_migration(seeded: None) -> None:
    coaches = Group.objects.get(name="coaches")
    codenames = set(coaches.permissions.values_list("codename", flat=True))
    assert {"view_turn", "view_agentrun", "add_annotation"} <= codenames
    assert not any(c.startswith(("delete_", "change_turn", "add_blackboard")) for c in codenames)
    assert not Group.objects.get(name="coachees").permissions.exists()


@pytest.mark.parametrize(
    "url_name",
    [
        "admin:agents_coachingsession_changelist",
        "admin:agents_turn_changelist",
        "admin:agents_agentrun_changelist",
        "admin:agents_message_changelist",
        "admin:agents_conflict_changelist",
        "admin:agents_blackboardversion_changelist",
        "admin:agents_annotation_changelist",
        "admin:agents_turn_review_queue",
        "admin:agents_coachingsession_coachees",
    ],
)
def test_lists_do_not_make_a_query_per_row(seeded: None, url_name: str) -> None:
    coach = make_coach("coach_kim")
    build_conversation("ana_mk", "MKANA", coach=coach)
    coach_client = logged_in(coach)
    coach_client.get(reverse(url_name))  # warm caches (content types, sessions)
    with CaptureQueriesContext(connection) as small:
        assert coach_client.get(reverse(url_name)).status_code == 200
    build_conversation("ben_mk", "MKBEN", coach=coach, sessions=2)
    build_conversation("cem_mk", "MKCEM", coach=coach, sessions=2)
    with CaptureQueriesContext(connection) as large:
        assert coach_client.get(reverse(url_name)).status_code == 200
    assert len(large.captured_queries) == len(small.captured_queries), [q["sql"] for q in large.captured_queries]


def test_the_review_pages_make_a_fixed_number_of_queries(coach_client: Client, convo: Conversation) -> None:
    session = convo.sessions[0]
    with CaptureQueriesContext(connection) as one:
        coach_client.get(review_url(session))
    # Three more turns in the same session (copies of the others): same number of queries.
    for turn in list(session.turns.all()):
        extra = Message.objects.create(session=session, seq=100 + turn.pk, role=Role.USER, text="again")
        copy = Turn.objects.create(session=session, user_message=extra, deadline_at=turn.deadline_at)
        for run in turn.agent_runs.all():
            run.pk = None
            run.turn = copy
            run.save()
    with CaptureQueriesContext(connection) as two:
        coach_client.get(review_url(session))
    assert len(two.captured_queries) == len(one.captured_queries)
    with CaptureQueriesContext(connection) as overview:
        coach_client.get(reverse("admin:agents_coachingsession_coachee", args=[convo.coachee.pk]))
    assert len(overview.captured_queries) < 20
