"""What the detectors cost at accept: `python -m benchmarks.crisis_detector`.

Times the crisis pre-gate, `pregate.assess` (every seeded pattern over each variant of the
text, then the classifier over the message in pieces and over the session's last three coachee
messages), and after it the steering detector, `steering.assess`, as accept runs them, for 4,000-
character messages: ordinary prose, and the bad inputs accept must survive (random Unicode,
mixed scripts, zero-width joiners, combining marks, one long word, repeated emoji), prose dictated
without punctuation (one run of words, read in overlapping windows); and one short
message of three sentences, which the classifier also reads sentence by sentence. No database:
the patterns are the ones the seed migrations install. Goal: p50 <= 20 ms, p99 <= 50 ms.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coaching_site.settings")

import django

django.setup()

from agents.safety import evaluation, pregate, steering  # noqa: E402

CHARS = 4000
PROSE = (
    "I had a long week at work and I want to talk about how I plan my mornings. "
    "My manager asked me to lead the new project and I am not sure I have the time. "
)


def inputs() -> dict[str, str]:
    rng = random.Random(14)
    return {
        "prose": (PROSE * 40)[:CHARS],
        # Dictated: one run of words without sentence ends, read in overlapping windows.
        "dictated, no punctuation": (PROSE.lower().replace(".", "").replace(",", "") * 40)[:CHARS],
        "random unicode": "".join(
            chr(rng.choice([rng.randrange(0x20, 0xD7FF), rng.randrange(0xE000, 0xFFFD)])) for _ in range(CHARS)
        ),
        "mixed scripts": "".join(
            rng.choice(["привет ", "hello ", "مرحبا ", "你好 ", "γειά ", "olá "]) for _ in range(800)
        )[:CHARS],
        "zero-width joiners": ("👩\u200d👩\u200d👧\u200d👦" * 600)[:CHARS],
        "combining marks": (("a" + "\u0301\u0308\u0327" * 20) * 70)[:CHARS],
        "one long word": "x" * CHARS,
        "repeated emoji": "😭" * CHARS,
        "crisis at the end": (PROSE * 40)[: CHARS - 40] + " and honestly I want to end my life",
        # Short and in sentences: each sentence is also read on its own (a means question beside distress).
        "short, three sentences (95 chars)": "Rough week at work. My manager moved the deadline again. "
        "How do I plan my mornings better?",
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    patterns = evaluation.seeded_patterns()
    started = time.perf_counter()
    pregate.warm(patterns)
    steering.warm()
    print(f"classifiers ready in {(time.perf_counter() - started) * 1000:.0f} ms ({len(patterns)} patterns)")
    history = [(PROSE * 10)[: pregate.HISTORY_CHARS]] * pregate.HISTORY_MESSAGES
    print(
        f"| input ({CHARS} chars unless said, 3 earlier messages) | p50 ms | p99 ms | max ms | "
        "of which steering, p50 ms | fired |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    worst_p50 = worst_p99 = 0.0
    for name, text in inputs().items():
        timings, steering_timings = [], []
        fired = None
        for _ in range(args.runs):
            t0 = time.perf_counter()
            fired = pregate.assess(text, patterns, history)
            t1 = time.perf_counter()
            steered = steering.assess(text)
            t2 = time.perf_counter()
            timings.append((t2 - t0) * 1000)
            steering_timings.append((t2 - t1) * 1000)
        p50, p99 = statistics.median(timings), percentile(timings, 0.99)
        worst_p50, worst_p99 = max(worst_p50, p50), max(worst_p99, p99)
        layers = [layer for layer in (fired.layer if fired else "", "steering" if steered else "") if layer]
        print(
            f"| {name} | {p50:.1f} | {p99:.1f} | {max(timings):.1f} | "
            f"{statistics.median(steering_timings):.1f} | {', '.join(layers) or '-'} |"
        )
    verdict = "within" if worst_p50 <= 20 and worst_p99 <= 50 else "OVER"
    print(f"worst p50 {worst_p50:.1f} ms, worst p99 {worst_p99:.1f} ms: {verdict} the 20/50 ms budget")


if __name__ == "__main__":
    main()
