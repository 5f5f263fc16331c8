"""Daphne, with oversized or invalid WebSocket frames answered by a close code.

Daphne's WebSocket factory keeps autobahn's `failByDrop`: a frame over the maximum message size
(1 MiB) or a text frame that is not UTF-8 drops the TCP connection, and the browser sees only
1006. With `failByDrop` off, autobahn closes properly instead: 1009 ("message too big") or 1007
with a reason, which the page can show. Daphne's command line has no option for it, so this
entry point sets it and then runs Daphne's own command line unchanged:

    python -m coaching_site.serve -b 127.0.0.1 -p 8000 coaching_site.asgi:application
"""

from __future__ import annotations

from typing import Any

from daphne import server
from daphne.cli import CommandLineInterface


class ClosingWebSocketFactory(server.WebSocketFactory):
    def setProtocolOptions(self, **options: Any) -> None:
        options.setdefault("failByDrop", False)
        super().setProtocolOptions(**options)


def main() -> None:
    server.WebSocketFactory = ClosingWebSocketFactory
    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
