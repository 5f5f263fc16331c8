"""Serve this host's metrics on their own port, for a host that runs Celery workers but no
Daphne (on a Daphne host, /metrics already covers every process). Bound to localhost unless
COACHING_METRICS_ADDR or --addr opens it: this port has no token."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from prometheus_client import start_http_server

from agents.observability import metrics
from agents.observability.views import scrape_registry


class Command(BaseCommand):
    help = "Serve the host's Prometheus metrics (multiprocess directory) on a separate port."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--addr", default=settings.COACHING_METRICS_ADDR)
        parser.add_argument("--port", type=int, default=settings.COACHING_METRICS_PORT)

    def handle(self, *args: Any, addr: str, port: int, **options: Any) -> None:
        if not metrics.enabled():
            raise CommandError("metrics are off (COACHING_METRICS=0)")
        if not settings.PROMETHEUS_MULTIPROC_DIR:
            raise CommandError("set PROMETHEUS_MULTIPROC_DIR to the workers' directory: there is nothing else to serve")
        _server, thread = start_http_server(port, addr=addr, registry=scrape_registry())
        self.stdout.write(f"serving metrics on http://{addr}:{port}/metrics")
        thread.join()
