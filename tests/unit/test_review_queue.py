"""The coach's review queue finds turns by itself: every turn of a run that failed a quality or
safety check, got a thumbs-down, or ended degraded, with the reason; turns are numbered per
session, and the admin home links to the queue."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.urls import reverse

from agents import selectors
from agents.llm.simulator.server import SimulatorServer
from agents.models import AnswerFeedback, PromptVersion, QualityFinding, Turn
from agents.pipeline import steps
from agents.turns import accept, dispatch, feedback, sessions
from tests.support.config import point_agents_at
from tests.support.people import logged_in, make_coach, make_coachee, make_operator
from tests.support.turns import CLEAN_CRITIC

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]

META_JUNK = "The answer is a JSON with the requested key. The response was: {json}."
GOOD = "One small step could help: what would a ten-minute run tomorrow morning look like for you?"
BLOCKED_VERDICT = {"violated_moves": [], "unsafe_content": ["diagnosis"], "explanation": "It diagnoses."}


def synth(reply: str) -> dict[str, Any]:
    return {"reply": reply, "moves_used": [], "signals_used": [], "signals_missing": []}


def queued(client: Client, reason: str = "") -> tuple[list[int], str]:
    url = reverse("admin:agents_turn_review_queue") + (f"?reason={reason}" if reason else "")
    html = client.get(url).content.decode()
    return [int(t) for t in re.findall(r'<tr data-turn="(\d+)">', html)], html


@pytest.fixture
def run(seeded: None, sim: SimulatorServer, monkeypatch: pytest.MonkeyPatch) -> Any:
    """One coachee, their coach, and a way to run a turn's Synth stage on scripted replies."""
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    point_agents_at(sim.base_url)
    sim.configure(default={"ttft_ms": 0, "tokens_per_s": 0})
    coachee = make_coachee("quinn")
    coach = make_coach("coach_q", coachees=[coachee])
    session = sessions.session_start(user_id=coachee.pk)

    def turn(text: str, *replies: str, critic: list[dict[str, Any]] | None = None) -> Turn:
        # Turns of a run, one after another: the previous one ended before this one starts.
        Turn.objects.filter(session=session).update(status="done")
        accepted = accept.turn_accept(
            session_id=session.pk, user_id=coachee.pk, client_id=f"c{Turn.objects.count()}", text=text
        )
        if replies:
            sim.configure(
                agents={
                    "synth": {"script": [synth(r) for r in replies], "repeat_last": True},
                    "critic": {"script": critic or [CLEAN_CRITIC], "repeat_last": True},
                }
            )
            steps.synth_step(turn_id=accepted.turn_id)
        return Turn.objects.get(pk=accepted.turn_id)

    turn.coachee = coachee  # type: ignore[attr-defined]
    turn.coach = coach  # type: ignore[attr-defined]
    return turn


def test_every_turn_that_failed_a_check_is_queued_by_itself_with_the_reason(run: Any) -> None:
    calm = run("I ran twice this week.", GOOD)
    junk_then_good = run("What should I do about my runs?", META_JUNK, GOOD)  # regenerated: passed in the end
    junk_twice = run("And about my evenings?", META_JUNK, META_JUNK)  # fallback
    critic_objected = run("Do I have ADHD?", GOOD, GOOD, critic=[BLOCKED_VERDICT, CLEAN_CRITIC])
    crisis = run("I want to end my life")  # the safety pre-gate, no model involved
    assert not QualityFinding.objects.filter(turn=calm).exists()
    failed = [t for t in Turn.objects.order_by("started_at") if t.pk != calm.pk]
    assert [t.pk for t in failed] == [junk_then_good.pk, junk_twice.pk, critic_objected.pk, crisis.pk]

    client = logged_in(run.coach)
    listed, html = queued(client)
    # Nobody flagged anything: the queue found every one of them. (Only Synth runs in this
    # harness, so every turn here also ends degraded, the calm one included: it is listed for
    # that alone.)
    assert set(listed) >= {t.pk for t in failed}
    calm_row = html[html.index(f'<tr data-turn="{calm.pk}">') :]
    calm_row = calm_row[: calm_row.index("</tr>")]
    assert re.findall(r'<span class="badge ([\w-]+)">', calm_row) == ["degraded"]
    row = html[html.index(f'<tr data-turn="{junk_then_good.pk}">') :]
    row = row[: row.index("</tr>")]
    assert "Synth&#x27;s reply failed meta talk" in row
    assert "regenerated with the failure named" in row
    assert "turn 2</span>" in row  # its number in the session, not its database id
    critic_row = html[html.index(f'<tr data-turn="{critic_objected.pk}">') :]
    critic_row = critic_row[: critic_row.index("</tr>")]
    assert "Critic gate, round 1" in critic_row
    assert "Escalation: Crisis" in html

    # Each failed check by itself: quality and critic under "Failed a check", the pre-gate's
    # crisis under "Escalated"; the calm turn in neither.
    checks, _ = queued(client, "checks")
    assert checks == [junk_then_good.pk, junk_twice.pk, critic_objected.pk]
    escalated, _ = queued(client, "escalated")
    assert escalated == [crisis.pk]


def test_a_thumbs_down_puts_the_turn_in_the_queue_with_the_coachees_words(run: Any) -> None:
    liked = run("I ran twice.", GOOD)
    disliked = run("I did not run.", GOOD)
    for turn, rating in ((liked, 1), (disliked, -1)):
        assert turn.synth_message_id is not None
        feedback.answer_feedback_set(
            user_id=run.coachee.pk, message_id=turn.synth_message_id, rating=rating, comment="Too generic."
        )
    listed, html = queued(logged_in(run.coach), "feedback")
    assert listed == [disliked.pk]
    assert "Thumbs down from the coachee: “Too generic.”" in html
    # Counted per prompt version of the Synth run that wrote the answer.
    given = AnswerFeedback.objects.get(turn=disliked)
    assert given.prompt_version is not None
    assert given.prompt_version.agent == "synth"
    counted = selectors.with_feedback_counts(PromptVersion.objects.filter(pk=given.prompt_version.pk)).get()
    assert (counted.thumbs_up, counted.thumbs_down) == (1, 1)  # type: ignore[attr-defined]  # annotations
    # Operators read the count on the prompt versions list.
    operator = logged_in(make_operator("olga"))
    listing = operator.get(reverse("admin:agents_promptversion_changelist") + "?agent=synth").content.decode()
    assert "1 up · 1 down" in listing


def test_a_coachee_rates_only_their_own_full_answers(run: Any) -> None:
    turn = run("I ran twice.", GOOD)
    other = make_coachee("mallory")
    assert turn.synth_message_id is not None
    with pytest.raises(PermissionDenied, match="not a full answer of yours"):
        feedback.answer_feedback_set(user_id=other.pk, message_id=turn.synth_message_id, rating=-1)
    with pytest.raises(PermissionDenied, match="not a full answer of yours"):
        feedback.answer_feedback_set(user_id=run.coachee.pk, message_id=turn.user_message_id, rating=-1)
    assert not AnswerFeedback.objects.exists()


def test_the_admin_home_links_to_the_queue(run: Any) -> None:
    html = logged_in(run.coach).get(reverse("admin:index")).content.decode()
    assert f'href="{reverse("admin:agents_turn_review_queue")}"' in html


def test_blackboard_counts_are_spelled_as_people_write_them() -> None:
    from agents.review.overview import count_label

    assert [count_label(n, "Priority") for n in (0, 1, 3)] == ["0 priorities", "1 priority", "3 priorities"]
    assert count_label(2, "Goal") == "2 goals"
