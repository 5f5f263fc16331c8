"""Values read when Prometheus scrapes, not counted as work happens: the Celery queue's depth
(Redis) and each endpoint's circuit breaker (Redis, shared by every process). Registered only
on the scrape's own registry (views.py), so no process pays for them between scrapes."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import redis
from django.conf import settings
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from agents.llm import breaker

logger = logging.getLogger(__name__)

# Breaker states as numbers, for a graph and an alert (> 0: calls are being refused).
BREAKER_STATES = {"closed": 0, "half_open": 1, "open": 2}
# kombu's Redis transport keeps messages of priority p in "<queue>\x06\x16<p>" next to the
# plain list; the app sends none with a priority, but a depth that skipped them would lie.
PRIORITY_SEPARATOR = "\x06\x16"
PRIORITY_STEPS = (3, 6, 9)


class QueueDepthCollector(Collector):
    """Messages waiting in each Celery queue on the broker (not yet taken by a worker)."""

    def __init__(self, client: redis.Redis, queues: list[str]) -> None:
        self.client = client
        self.queues = queues

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "coaching_celery_queue_depth", "Celery messages waiting on the broker, per queue.", labels=["queue"]
        )
        try:
            pipe = self.client.pipeline(transaction=False)
            for queue in self.queues:
                pipe.llen(queue)
                for step in PRIORITY_STEPS:
                    pipe.llen(f"{queue}{PRIORITY_SEPARATOR}{step}")
            lengths = pipe.execute()
        except redis.RedisError:
            logger.warning("queue depth: the broker cannot be read", exc_info=True)
            return  # no sample rather than a wrong zero: the scrape shows the gap
        per_queue = len(PRIORITY_STEPS) + 1
        for index, queue in enumerate(self.queues):
            family.add_metric([queue], float(sum(lengths[index * per_queue : (index + 1) * per_queue])))
        yield family


class BreakerCollector(Collector):
    """Each model endpoint's circuit breaker as every process sees it (it lives in Redis)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from agents.models import ModelEndpoint

        state = GaugeMetricFamily(
            "coaching_llm_breaker_state",
            "Circuit breaker per endpoint: 0 closed, 1 half-open (one probe allowed), 2 open (calls refused).",
            labels=["endpoint"],
        )
        failures = GaugeMetricFamily(
            "coaching_llm_breaker_failures",
            "Consecutive health failures the breaker has counted per endpoint.",
            labels=["endpoint"],
        )
        limit = GaugeMetricFamily(
            "coaching_llm_endpoint_max_concurrency",
            "The concurrency an operator configured per endpoint (compare with requests in flight).",
            labels=["endpoint"],
        )
        for name, max_concurrency in ModelEndpoint.objects.values_list("name", "max_concurrency"):
            current = breaker.for_endpoint(name).state()
            state.add_metric([name], BREAKER_STATES[current.state])
            failures.add_metric([name], current.failures)
            limit.add_metric([name], max_concurrency)
        yield state
        yield failures
        yield limit


def broker_client() -> redis.Redis:
    return breaker.make_client(settings.CELERY_BROKER_URL)


def queue_names() -> list[str]:
    return [getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery")]
