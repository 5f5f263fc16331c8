"""Memory in admin: summaries that failed their check reach the coach's review queue (only for
their own coachees); Brier scores show on the coachee overview and the operator's prompt list."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from agents.models import (
    Message,
    Prediction,
    PredictionStatus,
    Role,
    SessionSummary,
    SummaryStatus,
    SummaryStrategy,
    Turn,
)
from agents.turns import accept, dispatch, event_log, sessions
from tests.support.people import logged_in, make_coach, make_coachee, make_operator

pytestmark = pytest.mark.usefixtures("seeded")


@pytest.fixture(autouse=True)
def _no_canvas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)


def flagged_summary(coachee: Any, missing: str) -> SessionSummary:
    session = sessions.session_start(user_id=coachee.pk)
    Message.objects.create(session=session, seq=event_log.next_seq(session.pk), role=Role.USER, text="hi")
    return SessionSummary.objects.create(
        session=session,
        covers_until_seq=1,
        attempt=2,
        strategy=SummaryStrategy.EXTRACTIVE,
        status=SummaryStatus.FLAGGED,
        data={"overview": "x"},
        check_result={"passed": False, "missing": [missing], "questions": []},
    )


def scored_prediction(coachee: Any) -> Prediction:
    session = sessions.session_start(user_id=coachee.pk)
    accepted = accept.turn_accept(session_id=session.pk, user_id=coachee.pk, client_id="p", text="I did it")
    return Prediction.objects.create(
        coachee=coachee,
        turn=Turn.objects.get(pk=accepted.turn_id),
        commitment="Stretch",
        probability=0.8,
        horizon_days=3,
        made_at=timezone.now(),
        due_at=timezone.now(),
        model_id="model-under-test",
        status=PredictionStatus.RESOLVED,
        outcome=False,
    )


def test_a_flagged_summary_reaches_its_coach_and_no_other() -> None:
    mine, theirs = make_coachee("mine"), make_coachee("theirs")
    coach = make_coach("coach_ann", coachees=[mine])
    make_coach("coach_bo", coachees=[theirs])
    own = flagged_summary(mine, "MINE-MISSING-COMMITMENT")
    other = flagged_summary(theirs, "THEIRS-MISSING-COMMITMENT")

    html = logged_in(coach).get(reverse("admin:agents_turn_review_queue")).content.decode()

    assert f'data-summary="{own.pk}"' in html
    assert "MINE-MISSING-COMMITMENT" in html
    assert f'data-summary="{other.pk}"' not in html
    assert "THEIRS-MISSING-COMMITMENT" not in html


def test_the_coachee_overview_shows_summaries_and_brier_scores() -> None:
    coachee = make_coachee("scored")
    coach = make_coach("coach_cy", coachees=[coachee])
    flagged_summary(coachee, "A-MISSING-FACT")
    scored_prediction(coachee)
    response = logged_in(coach).get(reverse("admin:agents_coachingsession_coachee", args=[coachee.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert "A-MISSING-FACT" in html
    assert "model-under-test" in html
    assert "0.64" in html  # (0.8 - 0)^2


def test_operators_see_brier_scores_per_prompt_version_and_model() -> None:
    scored_prediction(make_coachee("op-scored"))
    html = logged_in(make_operator("op_dee")).get(reverse("admin:agents_promptversion_changelist")).content.decode()
    assert 'id="brier-table"' in html
    assert "model-under-test" in html
    assert "0.64" in html


def test_operators_can_open_and_draft_the_summarizer_prompt() -> None:
    from agents.models import PromptVersion

    client = logged_in(make_operator("op_eve"))
    version = PromptVersion.objects.get(agent="summarizer", status="active")
    pages: list[tuple[str, list[Any]]] = [
        ("promptversion_change", [version.pk]),
        ("promptversion_replay", [version.pk]),
        ("promptversion_new", ["summarizer"]),
    ]
    for name, args in pages:
        response = client.get(reverse(f"admin:agents_{name}", args=args))
        assert response.status_code == 200, name
