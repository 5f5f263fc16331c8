"""Signal receivers, connected in AgentsConfig.ready()."""

from typing import Any

from django.contrib.auth.signals import user_logged_out, user_login_failed
from django.dispatch import receiver

from agents import services, throttle


@receiver(user_logged_out)
def close_sockets_on_logout(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    # A logged-out browser must not keep receiving the conversation on an open socket.
    if user is not None and user.pk is not None:
        services.user_sockets_close(user_id=user.pk)


@receiver(user_login_failed)
def count_failed_login_by_address(sender: Any, credentials: Any, request: Any = None, **kwargs: Any) -> None:
    # Across usernames (django-axes counts per username and address).
    if request is not None:
        throttle.login_failed(request)
