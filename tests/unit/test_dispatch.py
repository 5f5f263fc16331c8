"""agents/turns/dispatch.py queues tasks by name: each name must be a task the worker runs."""

from celery import current_app

from agents import tasks
from agents.models import SPECIALISTS
from agents.turns import dispatch


def test_every_name_dispatch_queues_is_a_registered_task() -> None:
    names = [dispatch.SHADOW, dispatch.SPECIALIST, dispatch.SYNTH, dispatch.TURN_WATCHDOG, dispatch.SUMMARY_WRITE]
    registered = current_app.tasks
    for name in names:
        assert name in registered, name
    assert tasks.shadow_task.name == dispatch.SHADOW
    assert tasks.specialist_task.name == dispatch.SPECIALIST
    assert tasks.synth_task.name == dispatch.SYNTH


def test_the_turn_canvas_is_shadow_then_the_three_specialists_then_synth() -> None:
    canvas = dispatch.turn_canvas(7)
    shadow, fan_in = canvas.tasks
    assert (shadow.task, shadow.args, shadow.immutable) == (dispatch.SHADOW, (7,), True)
    header = fan_in.tasks
    assert [(s.task, s.args) for s in header] == [(dispatch.SPECIALIST, (7, agent)) for agent in SPECIALISTS]
    assert all(s.immutable for s in header)
    assert (fan_in.body.task, fan_in.body.args, fan_in.body.immutable) == (dispatch.SYNTH, (7,), True)
