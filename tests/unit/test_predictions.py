"""The prediction ledger: Shadow's predictions become rows, a later session's Shadow resolves them,
and a Brier score per prompt version and model comes out."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from agents.llm.simulator.server import SimulatorServer
from agents.memory import predictions
from agents.models import Prediction, PredictionStatus, SessionStatus, Turn
from agents.pipeline import steps
from agents.turns import accept, dispatch, sessions
from tests.support.config import point_agents_at
from tests.support.people import make_coachee

pytestmark = pytest.mark.usefixtures("seeded")


@pytest.fixture(autouse=True)
def _no_canvas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)


@pytest.fixture
def simulated(sim: SimulatorServer) -> SimulatorServer:
    point_agents_at(sim.base_url, kind="vllm")
    sim.configure(default={"ttft_ms": 0, "tokens_per_s": 0})
    return sim


def shadow(*, commitment: str, pct: int, resolutions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "stated_goals": [],
        "revealed_priorities": [],
        "follow_through": {"commitment": commitment, "probability_pct": pct, "horizon_days": 5, "rationale": "r"},
        "pattern_class": "unclear",
        "pattern_confidence_pct": 40,
    }
    if resolutions is not None:
        out["resolutions"] = resolutions
    return out


def turn_in_new_session(user: Any, text: str) -> Turn:
    session = sessions.session_start(user_id=user.pk)
    accepted = accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id="c", text=text)
    return Turn.objects.get(pk=accepted.turn_id)


def end(turn: Turn) -> None:
    type(turn.session).objects.filter(pk=turn.session_id).update(status=SessionStatus.ENDED, ended_at=timezone.now())


def test_a_prediction_is_recorded_then_resolved_by_a_later_session_and_scored(simulated: SimulatorServer) -> None:
    user = make_coachee()
    first = turn_in_new_session(user, "I'll stretch every evening.")
    simulated.configure(agents={"shadow": {"script": [shadow(commitment="Stretch every evening", pct=70)]}})
    steps.shadow_step(turn_id=first.pk)
    row = Prediction.objects.get(turn=first)
    assert (row.probability, row.horizon_days, row.status) == (0.7, 5, PredictionStatus.OPEN)
    assert (row.due_at - row.made_at).days == 5
    assert row.prompt_version is not None
    assert row.prompt_version.agent == "shadow"
    assert row.model_id == "sim-model"
    end(first)

    later = turn_in_new_session(user, "I did stretch every evening this week!")
    offered = predictions.open_for_resolution(turn=later)
    assert [p.pk for p in offered] == [row.pk]
    resolve = [{"prediction_id": row.pk, "done": True, "evidence": "did stretch every evening"}]
    simulated.configure(
        agents={"shadow": {"script": [shadow(commitment="Keep stretching", pct=80, resolutions=resolve)]}}
    )
    steps.shadow_step(turn_id=later.pk)

    row.refresh_from_db()
    assert row.status == PredictionStatus.RESOLVED
    assert row.outcome is True
    assert row.resolved_by_turn_id == later.pk
    scores = predictions.brier_scores()
    assert len(scores) == 1
    assert scores[0].resolved == 1
    assert scores[0].open == 1  # the later session's own prediction
    assert scores[0].brier == pytest.approx((0.7 - 1.0) ** 2)
    assert scores[0].prompt_version == row.prompt_version.version


def test_predictions_of_the_same_session_are_not_offered_for_resolution(simulated: SimulatorServer) -> None:
    user = make_coachee()
    first = turn_in_new_session(user, "I'll walk.")
    simulated.configure(agents={"shadow": {"script": [shadow(commitment="Walk", pct=50)]}})
    steps.shadow_step(turn_id=first.pk)
    accepted = accept.turn_accept(session_id=first.session_id, user_id=user.pk, client_id="d", text="And?")
    assert predictions.open_for_resolution(turn=Turn.objects.get(pk=accepted.turn_id)) == []


def test_a_resolution_of_an_unknown_prediction_is_refused_by_the_schema(simulated: SimulatorServer) -> None:
    user = make_coachee()
    turn = turn_in_new_session(user, "Hello")
    bogus = [{"prediction_id": 999999, "done": False, "evidence": "made up"}]
    simulated.configure(
        agents={"shadow": {"script": [shadow(commitment="Walk", pct=50, resolutions=bogus)], "repeat_last": True}}
    )
    assert steps.shadow_step(turn_id=turn.pk) == "failed"
    assert not Prediction.objects.filter(status=PredictionStatus.RESOLVED).exists()


def test_brier_scores_are_grouped_by_prompt_version_and_model(simulated: SimulatorServer) -> None:
    user = make_coachee()
    for i, (pct, outcome, model) in enumerate([(90, True, "a"), (90, False, "a"), (20, False, "b")]):
        turn = turn_in_new_session(user, f"m{i}")
        Prediction.objects.create(
            coachee=user,
            turn=turn,
            commitment="x",
            probability=pct / 100,
            horizon_days=1,
            made_at=timezone.now(),
            due_at=timezone.now(),
            model_id=model,
            status=PredictionStatus.RESOLVED,
            outcome=outcome,
        )
    scores = {s.model_id: s for s in predictions.brier_scores(coachee_id=user.pk)}
    assert scores["a"].brier == pytest.approx(((0.9 - 1) ** 2 + 0.9**2) / 2)
    assert scores["b"].brier == pytest.approx(0.04)
    assert scores["a"].resolved == 2
