"""The steering detector's figures (agents/safety/steering.py; docs/steering.md has the record).

    .venv/bin/python scripts/steering_eval.py --cv        # writer-wise cross-validation on training
    .venv/bin/python scripts/steering_eval.py             # the installed model on the measured sets

Cross-validation leaves out one writer's files at a time (a writer's files share a name's
prefix: steering_data/w1_en.tsv and w1_ru.tsv), with a third of the crisis classifier's messages,
and prints, per threshold, the attempts caught and the everyday lines flagged, with the same
model's false flags on ordinary coaching messages (tests/data/crisis_coaching_everyday.tsv) and
the crisis evaluation set (tests/data/crisis_eval_*.tsv: none of them is an attempt). Without
--cv, the installed model reads the blind set (tests/data/steering_blind.tsv) and the same two
sets: aggregates by language and category only, no line printed.
"""

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coaching_site.settings")

import django  # noqa: E402

django.setup()

from agents.safety import classifier, evaluation, steering  # noqa: E402
from agents.safety.embedding import embed  # noqa: E402

THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def ordinary_texts() -> dict[str, list[str]]:
    coaching = [row.text for row in evaluation.load_eval_set(pattern="crisis_coaching_everyday.tsv")]
    crisis_eval = [row.text for row in evaluation.load_eval_set()]
    return {"ordinary coaching": coaching, "crisis evaluation set": crisis_eval}


def cross_validate(settings: dict[str, float]) -> None:
    writers = sorted({path.name.split("_")[0] for path in steering.TRAINING_FILES})
    _, _, crisis_texts = classifier.read_training_data()
    print(f"embedding {len(crisis_texts)} crisis training messages (~1 minute)", flush=True)
    crisis_embeddings = embed(crisis_texts)
    rng = np.random.default_rng(0)
    crisis_fold = rng.integers(0, len(writers), len(crisis_texts))
    ordinary = ordinary_texts()
    caught: dict[float, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # attacks hit, attacks, everyday hit, everyday
    ordinary_hits: dict[tuple[str, float], int] = defaultdict(int)
    for fold, writer in enumerate(writers):
        train_paths = [p for p in steering.TRAINING_FILES if not p.name.startswith(f"{writer}_")]
        held_rows = steering.read_lines([p for p in steering.TRAINING_FILES if p.name.startswith(f"{writer}_")])
        labels, texts = steering.read_training_data(train_paths)
        kept = crisis_fold != fold
        train_texts = texts + [t for t, k in zip(crisis_texts, kept, strict=True) if k]
        is_attack = np.array([label == "attack" for label in labels] + [False] * int(kept.sum()))
        written = np.array([True] * len(texts) + [False] * int(kept.sum()))
        embeddings = np.vstack([embed(texts), crisis_embeddings[kept]])
        fitted = steering.fit(train_texts, is_attack, written, embeddings=embeddings, **settings)
        model = steering.Detector(fitted)
        held_scores = [model.score(row.text)[0] for row in held_rows]
        for threshold in THRESHOLDS:
            for row, score in zip(held_rows, held_scores, strict=True):
                attack = row.label == "attack"
                caught[threshold][0 if attack else 2] += score >= threshold
                caught[threshold][1 if attack else 3] += 1
        for name, texts_of_set in ordinary.items():
            scores = [model.score(text)[0] for text in texts_of_set]
            for threshold in THRESHOLDS:
                ordinary_hits[(name, threshold)] += sum(score >= threshold for score in scores)
        print(f"fold {writer}: {len(held_rows)} held-out lines", flush=True)
    for threshold in THRESHOLDS:
        hit, attacks, flagged, everyday = caught[threshold]
        others = ", ".join(
            f"{name} {ordinary_hits[(name, threshold)] / (len(texts) * len(writers)):.1%}"
            for name, texts in ordinary.items()
        )
        print(
            f"threshold {threshold}: attempts {hit}/{attacks} ({hit / attacks:.1%}), "
            f"near-miss everyday flagged {flagged}/{everyday} ({flagged / everyday:.1%}); {others}"
        )


def measure() -> None:
    blind = steering.read_lines([ROOT / "tests" / "data" / "steering_blind.tsv"])
    by: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in blind:
        hit = steering.assess(row.text) is not None
        for key in (row.label, f"{row.label} {row.lang}", f"{row.label} {row.category}"):
            by[key][0] += hit
            by[key][1] += 1
    for key in sorted(by):
        hits, total = by[key]
        print(f"blind set, {key}: {hits}/{total} flagged ({hits / total:.1%})")
    for name, texts in ordinary_texts().items():
        hits = sum(steering.assess(text) is not None for text in texts)
        print(f"{name}: {hits}/{len(texts)} flagged ({hits / len(texts):.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cv", action="store_true", help="writer-wise cross-validation on the training data")
    parser.add_argument("--c", type=float, default=steering.C)
    parser.add_argument("--near-miss-weight", type=float, default=steering.NEAR_MISS_WEIGHT)
    args = parser.parse_args()
    if args.cv:
        cross_validate({"c": args.c, "near_miss_weight": args.near_miss_weight})
    else:
        measure()


if __name__ == "__main__":
    main()
