"""Recall and false-positive rate of the crisis pre-gate on the evaluation set, per language
and per category, with the patterns the seed migrations install (no database needed).

    .venv/bin/python scripts/crisis_eval.py [--missed] [--layer pattern|classifier|both] [--set holdout]
"""

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coaching_site.settings")

import django

django.setup()

from agents import crisis_model, safety, safety_eval  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--missed", action="store_true", help="list the missed and the wrongly flagged messages")
    parser.add_argument("--layer", choices=["pattern", "classifier", "both"], default="both")
    parser.add_argument(
        "--set", choices=["evaluation", "holdout"], default="evaluation", help="holdout: tests/data/crisis_holdout.tsv"
    )
    args = parser.parse_args()
    patterns = safety_eval.seeded_patterns()

    def detect(text: str) -> safety.CrisisSignal | None:
        if args.layer == "pattern":
            match = safety.pregate(text, patterns)
            return None if match is None else safety.CrisisSignal("pattern", match.category, {})
        if args.layer == "classifier":
            hit = crisis_model.classify(text)
            return None if hit is None else safety.CrisisSignal("classifier", hit.category, {})
        return safety.assess(text, patterns)

    files = "crisis_holdout.tsv" if args.set == "holdout" else "crisis_eval_*.tsv"
    report = safety_eval.evaluate(safety_eval.load_eval_set(pattern=files), detect)
    print(safety_eval.format_report(report))
    if args.missed:
        print("\nmissed:")
        for row in report.missed:
            print(f"  [{row.lang}/{row.category}] {row.text}")
        print("flagged:")
        for row in report.flagged:
            print(f"  [{row.lang}/{row.category}] {row.text}")


if __name__ == "__main__":
    main()
