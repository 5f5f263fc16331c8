"""Change stamps and the context read ahead: a kept copy is used only while nothing it holds changed."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents import context, context_ahead, pipeline, services, stamps, tokens, turn_cache
from agents.llm.client import EndpointSpec
from agents.llm.simulator import SimulatorServer
from agents.models import (
    AgentConfig,
    AgentRun,
    BlackboardVersion,
    Message,
    Prediction,
    Role,
    SessionSummary,
    SummaryScope,
    SummaryStatus,
    Turn,
)
from tests.conftest import make_coachee, point_agents_at

SOURCE_TABLES = ("agents_message", "agents_sessionsummary", "agents_prediction", "agents_coachingsession")


def _coachee_version(user_id: int) -> int:
    key = stamps.coachee_key(user_id)
    return stamps.versions([key])[key]


def _accept(session_id: int, user_id: int, client_id: str, text: str) -> Turn:
    accepted = services.turn_accept(session_id=session_id, user_id=user_id, client_id=client_id, text=text)
    return pipeline.load_turn(accepted.turn_id)


@pytest.fixture
def coachee_session(seeded_tx: None, sim: SimulatorServer) -> tuple[Any, Any]:
    point_agents_at(sim.base_url)
    user = make_coachee()
    return user, services.session_start(user_id=user.pk)


def test_every_write_a_prefix_reads_renews_the_coachee_stamp(coachee_session: tuple[Any, Any]) -> None:
    user, session = coachee_session
    turn = _accept(session.pk, user.pk, "c-1", "I keep skipping my runs.")
    message = turn.user_message

    def renews(write: Any) -> bool:
        before = _coachee_version(user.pk)
        write()
        return _coachee_version(user.pk) != before

    assert renews(lambda: Message.objects.create(session=session, seq=90, role=Role.COACH, text="Hello."))
    assert renews(lambda: Message.objects.filter(pk=message.pk).update(text="I keep skipping them."))
    assert renews(
        lambda: SessionSummary.objects.create(
            session=session, scope=SummaryScope.IN_SESSION, status=SummaryStatus.VERIFIED, covers_until_seq=1
        )
    )
    now = timezone.now()
    assert renews(
        lambda: Prediction.objects.create(
            coachee=user, turn=turn, commitment="Run", probability=0.5, horizon_days=3, made_at=now, due_at=now
        )
    )
    assert renews(lambda: BlackboardVersion.objects.create(coachee=user, version=1, data={}))
    assert renews(lambda: AgentRun.objects.create(turn=turn, agent="stability"))
    assert not renews(lambda: AgentRun.objects.create(turn=turn, agent="persona"))  # not in the prefix
    assert renews(lambda: services.session_start(user_id=user.pk))
    assert renews(lambda: Message.objects.filter(seq=90).delete())
    # Another coachee's writes leave this one's stamp alone.
    other = make_coachee("other")
    assert not renews(lambda: services.session_start(user_id=other.pk))


def test_an_operators_change_renews_the_setup_stamp_within_its_transaction(seeded: None) -> None:
    before = stamps.versions([stamps.SETUP])[stamps.SETUP]
    AgentConfig.objects.filter(agent="persona").update(temperature=0.5)
    assert stamps.versions([stamps.SETUP])[stamps.SETUP] != before


def test_accepting_reads_the_setup_again_only_after_it_changed(turn: Turn) -> None:
    setup_reads = ("agents_agentconfig", "agents_promptversion", "agents_coachingmove")

    def accept_reads(client_id: str) -> list[str]:
        with CaptureQueriesContext(connection) as captured:
            services.turn_accept(
                session_id=turn.session_id, user_id=turn.session.coachee_id, client_id=client_id, text="Hi"
            )
        return [q["sql"] for q in captured.captured_queries if any(f'FROM "{t}"' in q["sql"] for t in setup_reads)]

    assert accept_reads("c-2") == []  # the setup the fixture's accept read is kept
    AgentConfig.objects.filter(agent="persona").update(temperature=0.5)
    assert accept_reads("c-3") != []


def test_the_next_turn_builds_its_prefix_from_the_copy_and_gets_the_same_text(
    coachee_session: tuple[Any, Any],
) -> None:
    user, session = coachee_session
    first = _accept(session.pk, user.pk, "c-1", "I keep skipping my runs.")
    Message.objects.create(
        session=session, seq=services.next_seq(session.pk), role=Role.SYNTH, text="What got in the way?"
    )
    context_ahead.read_ahead(session_id=session.pk)

    with CaptureQueriesContext(connection) as accepting:
        turn = _accept(session.pk, user.pk, "c-2", "Work, mostly.")
    assert not [q for q in accepting.captured_queries if 'FROM "agents_blackboardversion"' in q["sql"]]
    assert context_ahead.sources_for(turn) is not None
    with CaptureQueriesContext(connection) as captured:
        shared = pipeline.shared_context_build(turn)
    assert not [q for q in captured.captured_queries if any(f'FROM "{t}"' in q["sql"] for t in SOURCE_TABLES)]
    fresh = context.build_shared_context(
        turn,
        budget=context.shared_budget(list(turn_cache.setup_for(turn.pk).configs.values())),
        counter=context.prefix_counter(turn.pk),
    )
    assert shared.text == fresh.text
    assert shared.message_ids == fresh.message_ids == [first.user_message_id, turn.user_message_id]


def test_a_write_after_the_copy_makes_the_next_turn_read_afresh(coachee_session: tuple[Any, Any]) -> None:
    user, session = coachee_session
    _accept(session.pk, user.pk, "c-1", "I keep skipping my runs.")
    context_ahead.read_ahead(session_id=session.pk)
    # Another tab's message, committed after the copy was read.
    Message.objects.create(session=session, seq=services.next_seq(session.pk), role=Role.USER, text="Also my diet.")

    turn = _accept(session.pk, user.pk, "c-2", "Work, mostly.")
    assert context_ahead.sources_for(turn) is None
    assert "Also my diet." in pipeline.shared_context_build(turn).text


def test_a_turn_accepted_in_another_process_reads_afresh(coachee_session: tuple[Any, Any]) -> None:
    user, session = coachee_session
    context_ahead.read_ahead(session_id=session.pk)
    turn = _accept(session.pk, user.pk, "c-1", "I keep skipping my runs.")
    turn_cache.clear()  # not this process's accept: the stamp it read is not known here
    assert context_ahead.sources_for(turn) is None


def test_the_copy_is_not_used_once_a_commitment_it_holds_leaves_the_pinned_list(
    coachee_session: tuple[Any, Any],
) -> None:
    user, session = coachee_session
    earlier = _accept(session.pk, user.pk, "c-1", "I will run on Monday.")
    now = timezone.now()
    leaves_at = now + timedelta(seconds=1)  # a grace period after its due date ends then
    Prediction.objects.create(
        coachee=user,
        turn=earlier,
        commitment="Run on Monday",
        probability=0.6,
        horizon_days=1,
        made_at=now - timedelta(days=20),
        due_at=leaves_at - timedelta(days=context.OVERDUE_GRACE_DAYS),
    )
    context_ahead.read_ahead(session_id=session.pk)
    soon = _accept(session.pk, user.pk, "c-2", "Monday went fine.")
    assert context_ahead.sources_for(soon) is not None
    time.sleep(max(0.0, (leaves_at - timezone.now()).total_seconds()) + 0.05)
    later = _accept(session.pk, user.pk, "c-3", "And Tuesday too.")
    assert context_ahead.sources_for(later) is None
    assert "Run on Monday" not in pipeline.shared_context_build(later).text


def test_a_count_in_flight_is_waited_for_not_asked_again(sim: SimulatorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = EndpointSpec(name="test", kind="vllm", base_url=sim.base_url, model_id="sim-model")
    asked: list[str] = []
    answer = threading.Event()

    def slow_count(spec: EndpointSpec, text: str) -> int:
        asked.append(text)
        answer.wait(5)
        return 7

    monkeypatch.setattr(tokens, "_server_count", slow_count)
    tokens.count_soon(spec, ["a coachee message"])
    threading.Timer(0.1, answer.set).start()
    assert tokens.count_many(spec, ["a coachee message"]) == [7]
    assert asked == ["a coachee message"]
