"""Recall and false-positive rate of the crisis pre-gate on the evaluation set, per language
and per category, with the patterns the seed migrations install (no database needed).

    .venv/bin/python scripts/crisis_eval.py [--missed] [--layer pattern|classifier|both] [--set holdout|blind]
    .venv/bin/python scripts/crisis_eval.py --cv    # the classifier's thresholds, on the training set only
                                                    # (the main one, then the context rule's)
"""

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coaching_site.settings")

import django

django.setup()

from agents.safety import classifier, evaluation, pregate  # noqa: E402

SETS = {
    "evaluation": "crisis_eval_*.tsv",
    "holdout": "crisis_holdout.tsv",
    "blind": "crisis_blind.tsv",
    "probe": "crisis_probe.tsv",
}


def out_of_fold_scores() -> tuple[Any, Any, Any, Any, Any]:
    """Every training row scored by a 5-fold fit that never saw it: (labels, crisis, distress,
    category, long enough), numpy arrays."""
    import numpy as np
    from sklearn.model_selection import StratifiedKFold

    langs, labels, texts = classifier.read_training_data()
    embeddings = classifier.embed(texts)
    crisis, distress = np.zeros(len(texts)), np.zeros(len(texts))
    category = np.empty(len(texts), dtype=object)
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    for train, test in folds.split(texts, [f"{lang}/{label}" for lang, label in zip(langs, labels, strict=True)]):
        fitted = classifier.fit([texts[i] for i in train], [labels[i] for i in train], embeddings=embeddings[train])
        detector = classifier.Detector(fitted)
        for i in test:
            score = detector.score(texts[i], explain=False)
            crisis[i], distress[i], category[i] = score.crisis, score.distress, score.category
    long_enough = np.array([not classifier.too_short(text) for text in texts])
    return np.array(labels), crisis, distress, category, long_enough


def cross_validate(thresholds: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9)) -> None:
    """Recall on crisis rows and false positives on everyday rows of the training set, each row
    scored by a fit that never saw it: how the thresholds are chosen without any evaluation set.
    Then the context rule (a question about means or not eating after distress earlier in the
    session) on conversations made of those rows."""
    import numpy as np

    labels, crisis, distress, category, long_enough = out_of_fold_scores()
    is_crisis = np.isin(labels, classifier.CATEGORIES)
    print("| threshold | recall (crisis rows) | false positives (everyday rows) |\n| --- | --- | --- |")
    for threshold in thresholds:
        flagged = (crisis >= threshold) & long_enough
        print(
            f"| {threshold} | {flagged[is_crisis].mean():.1%} ({flagged[is_crisis].sum()}/{is_crisis.sum()}) | "
            f"{flagged[~is_crisis].mean():.1%} ({flagged[~is_crisis].sum()}/{(~is_crisis).sum()}) |"
        )

    # Everyday conversations: an everyday row after three everyday rows (distressed ones among
    # them, as real sessions have). Crisis: a means or eating row the main threshold misses,
    # after one distressed row and two ordinary ones.
    rng = np.random.default_rng(0)
    everyday, ordinary, distressed = (
        np.where(np.isin(labels, kinds))[0] for kinds in (["none", "distress"], ["none"], ["distress"])
    )
    current = rng.choice(everyday, 5000)
    history = rng.choice(everyday, (5000, 3))
    missed = np.where(np.isin(labels, classifier.CONTEXT_CATEGORIES) & long_enough & (crisis < classifier.THRESHOLD))[0]
    after_loss = np.column_stack([rng.choice(distressed, len(missed)), rng.choice(ordinary, (len(missed), 2))])
    print(
        "\n| context rule: crisis score / earlier distress | everyday conversations flagged "
        "| missed means/eating rows caught |\n| --- | --- | --- |"
    )
    for bar in (0.5, 0.6, 0.7, 0.8):
        for context in (0.6, 0.8, 0.9):

            def fires(rows: Any, earlier: Any, bar: float = bar, context: float = context) -> Any:
                return (
                    (crisis[rows] >= bar)
                    & (crisis[rows] < classifier.THRESHOLD)
                    & np.isin(category[rows], classifier.CONTEXT_CATEGORIES)
                    & long_enough[rows]
                    & (distress[earlier].max(axis=1) >= context)
                )

            caught = fires(missed, after_loss).sum()
            print(f"| {bar} / {context} | {fires(current, history).mean():.2%} | {caught}/{len(missed)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--missed", action="store_true", help="list the missed and the wrongly flagged messages")
    parser.add_argument("--layer", choices=["pattern", "classifier", "both"], default="both")
    parser.add_argument(
        "--set",
        choices=list(SETS),
        default="evaluation",
        help="; ".join(f"{name}: tests/data/{files}" for name, files in SETS.items()),
    )
    parser.add_argument("--cv", action="store_true", help="5-fold cross-validation of the classifier on training data")
    args = parser.parse_args()
    if args.cv:
        cross_validate()
        return
    patterns = evaluation.seeded_patterns()

    def detect(text: str) -> pregate.CrisisSignal | None:
        if args.layer == "pattern":
            match = pregate.pregate(text, patterns)
            return None if match is None else pregate.CrisisSignal("pattern", match.category, {})
        if args.layer == "classifier":
            hit = classifier.classify(text)
            return None if hit is None else pregate.CrisisSignal("classifier", hit.category, {})
        return pregate.assess(text, patterns)

    report = evaluation.evaluate(evaluation.load_eval_set(pattern=SETS[args.set]), detect)
    print(evaluation.format_report(report))
    if args.missed:
        print("\nmissed:")
        for row in report.missed:
            print(f"  [{row.lang}/{row.category}] {row.text}")
        print("flagged:")
        for row in report.flagged:
            print(f"  [{row.lang}/{row.category}] {row.text}")


if __name__ == "__main__":
    main()
