"""Reading a Prometheus scrape in tests: parse the text format, sum a metric over labels."""

from __future__ import annotations

from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum of a metric's samples whose labels include these."""
    wanted = set(labels.items())
    return sum(value for (n, lbls), value in samples.items() if n == name and wanted <= set(lbls))


def scraped(name: str, **labels: str) -> float:
    """A metric's sum in this process's registry now."""
    return total(parse(generate_latest(REGISTRY).decode()), name, **labels)
