"""Writers of a running turn lock its row before the session's (next_seq): in the other order
two of them deadlock, and PostgreSQL aborts one (a Coach reply was lost that way)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from agents.chat.coach import coach_prepare, coach_record_start
from agents.llm.simulator.server import SimulatorServer
from agents.models import Message, Role, Turn
from agents.turns import accept, dispatch, event_log, sessions
from tests.support.config import point_agents_at
from tests.support.people import make_coachee

pytestmark = pytest.mark.django_db(transaction=True)


def test_coach_recording_its_start_waits_for_a_writer_holding_the_turn_instead_of_deadlocking(
    seeded_tx: None, sim: SimulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    point_agents_at(sim.base_url)
    user = make_coachee()
    session = sessions.session_start(user_id=user.pk)
    accepted = accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id="c-1", text="Hello.")
    assert accepted.turn is not None
    call = coach_prepare(accepted.turn)
    assert call is not None
    holding = threading.Event()
    failures: list[BaseException] = []

    def arbitration_like() -> None:
        # The turn's row, then an event (next_seq), as arbitration's safety notice does.
        try:
            with transaction.atomic():
                Turn.objects.select_for_update().get(pk=accepted.turn_id)
                holding.set()
                time.sleep(0.5)  # Coach records its start meanwhile
                event_log.next_seq(session.pk)
        except BaseException as exc:
            failures.append(exc)
        finally:
            connection.close()

    writer = threading.Thread(target=arbitration_like)
    writer.start()
    assert holding.wait(5)
    coach_record_start(call=call)  # the other order: one of the two aborted ("deadlock detected")
    writer.join(10)
    assert failures == []
    assert Message.objects.filter(session=session, role=Role.COACH, pk=call.message_id).exists()
