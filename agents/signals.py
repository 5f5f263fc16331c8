"""Signal receivers, connected in AgentsConfig.ready()."""

import time
from typing import Any

from celery.signals import task_postrun, task_prerun
from django.contrib.auth.signals import user_logged_out, user_login_failed
from django.dispatch import receiver

from agents.chat import throttle
from agents.observability import metrics
from agents.turns import event_log


@receiver(user_logged_out)
def close_sockets_on_logout(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    # A logged-out browser must not keep receiving the conversation on an open socket.
    if user is not None and user.pk is not None:
        event_log.user_sockets_close(user_id=user.pk)


@receiver(user_login_failed)
def count_failed_login_by_address(sender: Any, credentials: Any, request: Any = None, **kwargs: Any) -> None:
    # Across usernames (django-axes counts per username and address).
    if request is not None:
        throttle.login_failed(request)


# --- Celery task timings (agents/observability/metrics.py) --------------------------------
# task_id -> monotonic start; a thread pool runs many tasks at once, each with its own id.
_task_started: dict[str, float] = {}


@task_prerun.connect
def task_timer_start(sender: Any = None, task_id: str = "", **kwargs: Any) -> None:
    if metrics.enabled():
        _task_started[task_id] = time.monotonic()


@task_postrun.connect
def task_timer_stop(sender: Any = None, task_id: str = "", state: str = "", **kwargs: Any) -> None:
    started = _task_started.pop(task_id, None)
    if started is not None:
        metrics.task_finished(task=getattr(sender, "name", ""), state=state, seconds=time.monotonic() - started)
