"""What stands in front of the chat consumer: exact origins and unknown paths.

Both refuse by accepting and then closing with a code, rather than closing before accept: a
browser sees the latter as HTTP 403 and reports only 1006, and Channels' URLRouter answers an
unknown path with an exception (HTTP 500 and a traceback). Nothing is sent before the close.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import validate_host

# The page was not served by this site (a cross-site WebSocket): static/chat/socket.js knows it.
CLOSE_ORIGIN_REFUSED = 4003
# No socket lives at this path.
CLOSE_NOT_FOUND = 4404
DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = tuple[str, str, int]


def parse_origin(value: str) -> Origin | None:
    """(scheme, host, port) of an origin or URL, the port filled in for the default ones."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def own_origin(scope: dict[str, Any]) -> Origin | None:
    """The origin a page of this site has when it opens this socket: the Host the socket was
    asked on (one of ALLOWED_HOSTS), with http for ws and https for wss."""
    host = _header(scope, b"host")
    if not host:
        return None
    scheme = "https" if scope.get("scheme") == "wss" else "http"
    origin = parse_origin(f"{scheme}://{host}")
    if origin is None or not validate_host(origin[1], settings.ALLOWED_HOSTS):
        return None
    return origin


def origin_allowed(scope: dict[str, Any]) -> bool:
    """Exactly the socket's own origin or one of TRUSTED_ORIGINS (shared with CSRF): scheme,
    host and port all equal. A missing Origin is refused: every browser sends one."""
    header = _header(scope, b"origin")
    origin = parse_origin(header) if header else None
    if origin is None:
        return False
    if origin == own_origin(scope):
        return True
    return origin in {parse_origin(o) for o in settings.TRUSTED_ORIGINS}


class RefuseSocket:
    """An ASGI app that accepts a socket and closes it at once with `code`."""

    def __init__(self, code: int) -> None:
        self.code = code

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            raise ValueError("RefuseSocket only answers WebSockets")
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.close", "code": self.code})
        while (await receive())["type"] != "websocket.disconnect":
            pass


class ExactOriginValidator:
    """Channels' AllowedHostsOriginValidator compares the host only (any scheme and port of an
    allowed host passed); this compares the whole origin."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.refuse = RefuseSocket(CLOSE_ORIGIN_REFUSED)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await self.refuse(scope, receive, send)
        return await self.app(scope, receive, send)
