"""The scrape path, /metrics: Prometheus with its bearer token, or an operator signed in to the
admin. Anyone else gets 401 (no credentials) or 403 (a coachee, a coach); with metrics off, 404."""

from __future__ import annotations

import hmac
from collections.abc import Iterator

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from agents.observability import collectors, metrics

# Who may read the metrics when signed in: operators and platform admins hold it; coaches and
# coachees do not.
OPERATOR_PERMISSION = "agents.view_agentconfig"


def may_read_metrics(request: HttpRequest) -> bool:
    token = settings.COACHING_METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer "):
        return hmac.compare_digest(header.removeprefix("Bearer ").encode(), token.encode())
    user = request.user
    return bool(user.is_authenticated and user.is_active and user.is_staff and user.has_perm(OPERATOR_PERMISSION))


class _ThisProcess(Collector):
    """Without a multiprocess directory: this process's own samples (single-process runs)."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


def scrape_registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    if settings.PROMETHEUS_MULTIPROC_DIR:
        multiprocess.MultiProcessCollector(registry, path=settings.PROMETHEUS_MULTIPROC_DIR)
    else:
        registry.register(_ThisProcess())
    registry.register(collectors.QueueDepthCollector(collectors.broker_client(), collectors.queue_names()))
    registry.register(collectors.BreakerCollector())
    return registry


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not metrics.enabled():
        raise Http404("metrics are off")
    if not may_read_metrics(request):
        if request.user.is_authenticated:
            return HttpResponse("Forbidden.\n", status=403, content_type="text/plain")
        response = HttpResponse("Credentials required.\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    response = HttpResponse(generate_latest(scrape_registry()), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response
