"""ASGI entry point: HTTP through Django, WebSockets through Channels."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coaching_site.settings")

# Django must be set up before anything imports models (consumers do).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from agents.chat.ws_guard import CLOSE_NOT_FOUND, ExactOriginValidator, RefuseSocket  # noqa: E402
from agents.routing import websocket_urlpatterns  # noqa: E402
from agents.safety import quality, steering  # noqa: E402
from agents.safety.pregate import warm_at_startup  # noqa: E402

warm_at_startup()
quality.warm()
steering.warm()

NOT_FOUND = RefuseSocket(CLOSE_NOT_FOUND)
application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": ExactOriginValidator(
            AuthMiddlewareStack(
                # Any other path: a close code, not URLRouter's "No route found" (an HTTP 500).
                # (Channels routes take ASGI apps where django-stubs expects views.)
                URLRouter([*websocket_urlpatterns, re_path(r"", NOT_FOUND)])  # type: ignore[arg-type]
            )
        ),
    }
)
