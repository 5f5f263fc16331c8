"""Session summaries: written when a session ends or idles, checked against the recorded facts,
retried with another strategy, flagged when they still fail, and used only when verified."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents import tasks
from agents.llm.simulator.server import SimulatorServer
from agents.memory import blackboard, compaction
from agents.memory.context import SharedContext, build_shared_context
from agents.models import (
    Agent,
    AgentRun,
    BlackboardVersion,
    CoachingSession,
    Message,
    Role,
    RunStatus,
    SessionStatus,
    SessionSummary,
    SummaryScope,
    SummaryStatus,
    Turn,
)
from agents.pipeline import runner
from agents.roles import structured
from agents.roles.schemas import ShadowOutput, SummaryOutput
from agents.turns import accept, dispatch, event_log, sessions, summaries
from tests.support.config import point_agents_at
from tests.support.people import make_coachee

pytestmark = pytest.mark.usefixtures("seeded")

COMMITMENT = "Walk for twenty minutes after lunch every weekday"
GOAL = "Feel less tired in the afternoons"
BIG_BUDGET = 100_000


@pytest.fixture(autouse=True)
def _no_canvas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """The summaries queued (session id, scope, until seq) instead of sent to the broker."""
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(dispatch, "summary_write_queue", lambda *args: calls.append(args))
    return calls


@pytest.fixture
def simulated(sim: SimulatorServer) -> SimulatorServer:
    point_agents_at(sim.base_url, kind="vllm")
    sim.configure(default={"ttft_ms": 0, "tokens_per_s": 0})
    return sim


def summary(
    *, commitments: list[dict[str, Any]], goals: list[str], overview: str = "They talked about energy."
) -> dict[str, Any]:
    return {
        "goals": goals,
        "commitments": commitments,
        "open_threads": ["What makes lunch breaks hard"],
        "patterns": ["overcommitment"],
        "blocked_moves": [],
        "overview": overview,
    }


def ended_session_with_a_commitment(user: Any) -> CoachingSession:
    """A session whose Shadow run recorded COMMITMENT and GOAL, then ended (no task queued)."""
    session = sessions.session_start(user_id=user.pk)
    accepted = accept.turn_accept(
        session_id=session.pk, user_id=user.pk, client_id="a", text=f"I'm so tired. I will {COMMITMENT.lower()}."
    )
    turn = Turn.objects.get(pk=accepted.turn_id)
    AgentRun.objects.create(
        turn=turn,
        agent=Agent.SHADOW,
        status=RunStatus.SUCCEEDED,
        parsed_output={
            "stated_goals": [{"text": GOAL, "evidence": []}],
            "revealed_priorities": [],
            "follow_through": {
                "commitment": COMMITMENT,
                "probability_pct": 50,
                "horizon_days": 7,
                "rationale": "First time they said it.",
            },
            "pattern_class": "unclear",
            "pattern_confidence_pct": 30,
            "resolutions": [],
        },
    )
    Message.objects.create(session=session, seq=event_log.next_seq(session.pk), role=Role.COACH, text="Sounds good.")
    CoachingSession.objects.filter(pk=session.pk).update(
        status=SessionStatus.ENDED, ended_at=timezone.now(), created_at=timezone.now() - timedelta(days=1)
    )
    return session


def next_turn(user: Any) -> Turn:
    session = sessions.session_start(user_id=user.pk)
    accepted = accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id="b", text="Hi again.")
    return runner.load_turn(accepted.turn_id)


def test_a_summary_that_drops_a_commitment_is_caught_retried_and_flagged(simulated: SimulatorServer) -> None:
    user = make_coachee()
    session = ended_session_with_a_commitment(user)
    dropped = summary(commitments=[], goals=[GOAL], overview="DROPPED-COMMITMENT SUMMARY")
    simulated.configure(agents={"summarizer": {"script": [dropped, dropped]}})

    result = compaction.summary_write(session_id=session.pk)

    assert result is not None
    attempts = list(SessionSummary.objects.filter(session=session).order_by("attempt"))
    assert [(s.strategy, s.status) for s in attempts] == [
        ("abstractive", SummaryStatus.FAILED),
        ("extractive", SummaryStatus.FLAGGED),
    ]
    for attempt in attempts:
        assert attempt.check_result["passed"] is False
        assert attempt.check_result["missing"] == [COMMITMENT]
        asked = {q["kind"]: q for q in attempt.check_result["questions"]}
        assert asked["commitment"]["answered"] is False
        assert asked["goal"]["answered"] is True
    assert result.status == SummaryStatus.FLAGGED

    # The failed summary is not used: the next session sees an excerpt of the transcript.
    shared = build_shared_context(next_turn(user), budget=BIG_BUDGET)
    assert "DROPPED-COMMITMENT SUMMARY" not in shared.text
    assert COMMITMENT.lower() in shared.text.lower()
    assert shared.dropped["sessions_without_verified_summary"] == [session.pk]


def test_the_second_strategy_can_pass_and_only_then_is_the_summary_used(simulated: SimulatorServer) -> None:
    user = make_coachee()
    session = ended_session_with_a_commitment(user)
    dropped = summary(commitments=[], goals=[GOAL], overview="FIRST TRY")
    kept = summary(commitments=[{"text": COMMITMENT, "due": "2026-12-07"}], goals=[GOAL], overview="SECOND TRY")
    simulated.configure(agents={"summarizer": {"script": [dropped, kept]}})

    result = compaction.summary_write(session_id=session.pk)

    assert result is not None
    assert result.status == SummaryStatus.VERIFIED
    assert result.strategy == "extractive"
    assert result.check_result["passed"] is True
    shared = build_shared_context(next_turn(user), budget=BIG_BUDGET)
    assert "SECOND TRY" in shared.text
    assert "FIRST TRY" not in shared.text
    assert "sessions_without_verified_summary" not in shared.dropped
    # Written again (a redelivered task): nothing new is asked of the model.
    calls = len(simulated.calls("summarizer"))
    assert compaction.summary_write(session_id=session.pk) == result
    assert len(simulated.calls("summarizer")) == calls


def test_a_summarizer_that_keeps_failing_is_flagged_not_silent(simulated: SimulatorServer) -> None:
    user = make_coachee()
    session = ended_session_with_a_commitment(user)
    simulated.configure(agents={"summarizer": {"fault": "http_500"}})
    result = compaction.summary_write(session_id=session.pk)
    assert result is not None
    assert result.status == SummaryStatus.FLAGGED
    assert result.error
    assert not SessionSummary.objects.filter(session=session, status=SummaryStatus.VERIFIED).exists()


def test_hidden_memory_items_are_not_asked_about(simulated: SimulatorServer) -> None:
    user = make_coachee()
    session = ended_session_with_a_commitment(user)
    turn = Turn.objects.get(session=session)
    shadow = ShadowOutput.model_validate(AgentRun.objects.get(turn=turn, agent=Agent.SHADOW).parsed_output)
    data = blackboard.merge_shadow(blackboard.empty(), shadow, turn_id=turn.pk, at=timezone.now().isoformat())
    goal_id = data["stated_goals"][0]["id"]
    BlackboardVersion.objects.create(coachee=user, version=1, data=blackboard.edit_item(data, goal_id, hidden=True))
    session.refresh_from_db()
    facts = compaction.session_facts(session, until_seq=session.last_seq)
    assert facts.commitments == [COMMITMENT]
    assert facts.goals == []


def test_ending_a_session_queues_its_summary(
    simulated: SimulatorServer, queued: list[tuple[Any, ...]], django_capture_on_commit_callbacks: Any
) -> None:
    user = make_coachee()
    session = sessions.session_start(user_id=user.pk)
    with django_capture_on_commit_callbacks(execute=True):
        assert sessions.session_end(session_id=session.pk, user_id=user.pk)
    assert queued == [(session.pk, SummaryScope.SESSION, None)]


def test_idle_sessions_are_ended_and_summarised(
    simulated: SimulatorServer, queued: list[tuple[Any, ...]], django_capture_on_commit_callbacks: Any
) -> None:
    idle_user, busy_user = make_coachee("idle"), make_coachee("busy")
    idle = sessions.session_start(user_id=idle_user.pk)
    busy = sessions.session_start(user_id=busy_user.pk)
    for session in (idle, busy):
        Message.objects.create(session=session, seq=event_log.next_seq(session.pk), role=Role.USER, text="hello")
    Message.objects.filter(session=idle).update(created_at=timezone.now() - timedelta(minutes=90))
    with django_capture_on_commit_callbacks(execute=True):
        ended = sessions.idle_sessions_end(idle_minutes=60)
    assert ended == [idle.pk]
    idle.refresh_from_db()
    busy.refresh_from_db()
    assert idle.status == SessionStatus.ENDED
    assert busy.status == SessionStatus.OPEN
    assert queued == [(idle.pk, SummaryScope.SESSION, None)]


def test_a_long_session_is_compacted_inside_under_the_same_check(
    simulated: SimulatorServer, queued: list[tuple[Any, ...]], django_capture_on_commit_callbacks: Any
) -> None:
    user = make_coachee()
    session = sessions.session_start(user_id=user.pk)
    old = long_history(session, 20, "OLD")
    accepted = accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id="x", text="And now?")
    turn = runner.load_turn(accepted.turn_id)
    with django_capture_on_commit_callbacks(execute=True):
        shared = runner.turn_shared_context(turn)
    assert shared.dropped["history_messages"] > 0
    assert len(queued) == 1
    session_id, scope, until = queued[0]
    assert (session_id, scope) == (session.pk, SummaryScope.IN_SESSION)
    assert shared.dropped["oldest_kept_seq"] <= until < turn.user_message.seq

    simulated.configure(
        agents={"summarizer": {"script": [summary(commitments=[], goals=[], overview="IN-SESSION SUMMARY")]}}
    )
    result = compaction.summary_write(session_id=session.pk, scope=scope, until_seq=until)
    assert result is not None
    assert result.status == SummaryStatus.VERIFIED  # nothing was recorded that it could drop

    accepted = accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id="y", text="Next one.")
    later = build_shared_context(runner.load_turn(accepted.turn_id), budget=BIG_BUDGET)
    assert "IN-SESSION SUMMARY" in later.text
    covered = [m for m in old if m.seq <= until]
    assert covered
    assert all(f"[message {m.id} " not in later.text for m in covered)
    assert later.dropped["history_summary_until_seq"] == until


def long_history(session: CoachingSession, count: int, tag: str) -> list[Message]:
    """`count` coachee messages too long for the prefix to keep them all."""
    return [
        Message.objects.create(
            session=session, seq=event_log.next_seq(session.pk), role=Role.USER, text=f"{tag}-{i} " + "story " * 150
        )
        for i in range(count)
    ]


def prefix_of_a_new_turn(session: CoachingSession, client_id: str, capture: Any) -> SharedContext:
    """Accept a message and build its turn's prefix, running what it queues on commit."""
    accepted = accept.turn_accept(session_id=session.pk, user_id=session.coachee_id, client_id=client_id, text="Now?")
    with capture(execute=True):
        return runner.turn_shared_context(runner.load_turn(accepted.turn_id))


def test_one_in_session_summary_is_written_at_a_time_and_each_part_is_tried_once(
    simulated: SimulatorServer, queued: list[tuple[Any, ...]], django_capture_on_commit_callbacks: Any
) -> None:
    session = sessions.session_start(user_id=make_coachee().pk)
    long_history(session, 20, "OLD")
    assert prefix_of_a_new_turn(session, "a", django_capture_on_commit_callbacks).dropped["history_messages"] > 0
    assert len(queued) == 1
    _, _, until = queued[0]

    # The summary is still being written: the next turns' prefixes drop history too, and queue nothing.
    prefix_of_a_new_turn(session, "b", django_capture_on_commit_callbacks)
    prefix_of_a_new_turn(session, "c", django_capture_on_commit_callbacks)
    assert len(queued) == 1

    # It ended without a verified summary: that part is not tried again at the next turn...
    summaries.summary_lease_release(session_id=session.pk, scope=SummaryScope.IN_SESSION)
    SessionSummary.objects.create(
        session=session,
        scope=SummaryScope.IN_SESSION,
        covers_until_seq=until,
        strategy="abstractive",
        status=SummaryStatus.FLAGGED,
    )
    prefix_of_a_new_turn(session, "d", django_capture_on_commit_callbacks)
    assert len(queued) == 1

    # ...but once the history has moved past it, the newer part is.
    long_history(session, 20, "NEW")
    shared = prefix_of_a_new_turn(session, "e", django_capture_on_commit_callbacks)
    assert shared.dropped["oldest_kept_seq"] > until
    assert len(queued) == 2
    assert queued[1][:2] == (session.pk, SummaryScope.IN_SESSION)
    assert queued[1][2] > until


def test_a_summary_the_broker_refused_leaves_no_lease_behind(
    simulated: SimulatorServer,
    queued: list[tuple[Any, ...]],
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    recorded = dispatch.summary_write_queue

    def refused(*args: Any) -> None:
        raise ConnectionError("the broker is down")

    session = sessions.session_start(user_id=make_coachee().pk)
    long_history(session, 20, "OLD")
    monkeypatch.setattr(dispatch, "summary_write_queue", refused)
    prefix_of_a_new_turn(session, "a", django_capture_on_commit_callbacks)  # logged, not raised: Coach's path
    monkeypatch.setattr(dispatch, "summary_write_queue", recorded)
    prefix_of_a_new_turn(session, "b", django_capture_on_commit_callbacks)
    assert len(queued) == 1


@pytest.mark.parametrize("ending", ["written", "crashed"])
def test_the_summary_task_releases_its_lease_however_it_ends(monkeypatch: pytest.MonkeyPatch, ending: str) -> None:
    released: list[tuple[int, str]] = []
    monkeypatch.setattr(
        summaries, "summary_lease_release", lambda *, session_id, scope: released.append((session_id, scope))
    )

    def summary_write(**kwargs: Any) -> None:
        if ending == "crashed":
            raise RuntimeError("the summarizer crashed")
        return None  # nothing to summarise

    monkeypatch.setattr(compaction, "summary_write", summary_write)
    if ending == "crashed":
        with pytest.raises(RuntimeError):
            tasks.summary_write_task(41, SummaryScope.IN_SESSION, 7)
    else:
        assert tasks.summary_write_task(41, SummaryScope.IN_SESSION, 7)["status"] == "nothing to summarise"
    assert released == [(41, SummaryScope.IN_SESSION)]


def test_the_summarizer_prompt_stays_within_its_budget(
    simulated: SimulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents.llm.client import EndpointSpec
    from agents.memory import tokens
    from agents.models import AgentConfig

    user = make_coachee()
    session = ended_session_with_a_commitment(user)
    for i in range(120):
        Message.objects.create(
            session=session, seq=event_log.next_seq(session.pk), role=Role.USER, text=f"LONG-{i} " + "went " * 190
        )
    sent: list[list[dict[str, str]]] = []
    original = structured.complete_structured

    def spy(**kwargs: Any) -> Any:
        sent.append(kwargs["messages"])
        return original(**kwargs)

    monkeypatch.setattr(structured, "complete_structured", spy)
    keep = summary(commitments=[{"text": COMMITMENT, "due": None}], goals=[GOAL])
    simulated.configure(agents={"summarizer": {"script": [keep]}})
    assert compaction.summary_write(session_id=session.pk).status == SummaryStatus.VERIFIED  # type: ignore[union-attr]

    config = AgentConfig.objects.select_related("endpoint").get(agent=Agent.SUMMARIZER)
    counter = tokens.counter_for(EndpointSpec.from_endpoint(config.endpoint))
    assert counter.messages(sent[0]) <= config.context_budget
    assert "earlier messages left out for length" in sent[0][0]["content"]
    assert "LONG-119 " in sent[0][0]["content"]  # the newest part is what is kept
    assert "LONG-0 " not in sent[0][0]["content"]
    assert simulated.calls("summarizer")[0]["prompt_tokens"] <= config.context_budget


def test_commitments_in_the_coachees_own_words_are_asked_about_too(simulated: SimulatorServer) -> None:
    # No Shadow run recorded anything (it failed): the transcript alone still raises the question.
    user = make_coachee()
    session = sessions.session_start(user_id=user.pk)
    Message.objects.create(
        session=session, seq=1, role=Role.USER, text="Ok. I'll book the dentist appointment by Friday. Promise."
    )
    Message.objects.create(session=session, seq=2, role=Role.COACH, text="I will remind you, I'll note it.")
    facts = compaction.session_facts(session, until_seq=2)
    assert facts.commitments == ["book the dentist appointment by Friday"]  # the coach's words are not asked

    forgot = summary(commitments=[], goals=[], overview="They talked about teeth.")
    kept = summary(commitments=[{"text": "Book the dentist appointment", "due": None}], goals=[])
    assert not compaction.summary_check(facts, SummaryOutput.model_validate(forgot))["passed"]
    assert compaction.summary_check(facts, SummaryOutput.model_validate(kept))["passed"]


def test_repeated_commitments_are_asked_about_once_and_the_number_asked_is_capped() -> None:
    topics = ["dentist", "groceries", "taxes", "garden", "letters", "bicycle", "laundry", "library"]
    said = [f"Run on Monday morning (turn {i})" for i in range(5)] + [f"Sort out the {t} soon" for t in topics]
    distinct = compaction._distinct_newest(said, compaction.CHECKED_COMMITMENTS)
    assert len(distinct) == compaction.CHECKED_COMMITMENTS
    assert distinct[-1] == "Sort out the library soon"  # the newest are kept
    assert not any("Monday" in d for d in distinct)
    assert sum("Run on Monday" in d for d in compaction._distinct_newest(said[:5], 6)) == 1


def test_recently_ended_sessions_without_a_summary_are_queued_again(
    queued: list[tuple[Any, ...]], django_capture_on_commit_callbacks: Any
) -> None:
    user = make_coachee()
    lost, old, done, empty = (sessions.session_start(user_id=user.pk) for _ in range(4))
    for session in (lost, old, done):
        Message.objects.create(session=session, seq=1, role=Role.USER, text="hello")
    for session, days in ((lost, 1), (old, 30), (done, 1), (empty, 1)):
        CoachingSession.objects.filter(pk=session.pk).update(
            status=SessionStatus.ENDED, ended_at=timezone.now() - timedelta(days=days)
        )
    SessionSummary.objects.create(
        session=done, covers_until_seq=1, strategy="abstractive", status=SummaryStatus.FLAGGED
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert summaries.unsummarised_sessions_queue() == [lost.pk]
    assert queued == [(lost.pk, SummaryScope.SESSION, None)]


def test_a_disabled_summarizer_flags_the_session_instead_of_calling_the_model(simulated: SimulatorServer) -> None:
    from agents.models import AgentConfig

    AgentConfig.objects.filter(agent=Agent.SUMMARIZER).update(enabled=False)
    session = ended_session_with_a_commitment(make_coachee())
    result = compaction.summary_write(session_id=session.pk)
    assert result is not None
    assert result.status == SummaryStatus.FLAGGED
    assert "disabled" in result.error
    assert simulated.calls("summarizer") == []


PARAPHRASE = "A short stroll once the midday meal is over, Monday to Friday"


def test_a_paraphrase_passes_when_the_checker_quotes_the_summary(simulated: SimulatorServer) -> None:
    session = ended_session_with_a_commitment(make_coachee())
    paraphrased = summary(commitments=[{"text": PARAPHRASE, "due": None}], goals=[GOAL])
    simulated.configure(
        agents={
            "summarizer": {"script": [paraphrased]},
            "summary_check": {"script": [{"answers": [{"question": 0, "answered": True, "quote": PARAPHRASE}]}]},
        }
    )
    result = compaction.summary_write(session_id=session.pk)
    assert result is not None
    assert result.status == SummaryStatus.VERIFIED
    assert result.attempt == 1
    commitment = result.check_result["questions"][0]
    assert (commitment["kind"], commitment["answered_by"]) == ("commitment", "quote")
    assert result.check_result["questions"][1]["answered_by"] == "words"  # the goal matched by words
    assert len(simulated.calls("summary_check")) == 1  # asked only about what words could not answer


def test_a_checker_quote_that_is_not_in_the_summary_does_not_pass_it(simulated: SimulatorServer) -> None:
    session = ended_session_with_a_commitment(make_coachee())
    dropped = summary(commitments=[], goals=[GOAL])
    made_up = {"answers": [{"question": 0, "answered": True, "quote": COMMITMENT}]}  # true, but not in it
    simulated.configure(
        agents={
            "summarizer": {"script": [dropped, dropped]},
            "summary_check": {"script": [made_up], "repeat_last": True},
        }
    )
    result = compaction.summary_write(session_id=session.pk)
    assert result is not None
    assert result.status == SummaryStatus.FLAGGED
    assert result.check_result["missing"] == [COMMITMENT]
    assert result.check_result["questions"][0]["rejected_quote"] == COMMITMENT
