"""Signal receivers, connected in AgentsConfig.ready()."""

from typing import Any

from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver

from agents import services


@receiver(user_logged_out)
def close_sockets_on_logout(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    # A logged-out browser must not keep receiving the conversation on an open socket.
    if user is not None and user.pk is not None:
        services.user_sockets_close(user_id=user.pk)
