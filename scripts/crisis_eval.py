"""Recall and false-positive rate of the crisis pre-gate on the evaluation set, per language
and per category, with the patterns the seed migrations install (no database needed).

    .venv/bin/python scripts/crisis_eval.py [--missed] [--layer pattern|classifier|both] [--set NAME]
    .venv/bin/python scripts/crisis_eval.py --cv    # the classifier's thresholds, on the training set only
                                                    # (the main one, then the context rule's)
    .venv/bin/python scripts/crisis_eval.py --cv-writers   # the same, each writer's file left out in turn
    .venv/bin/python scripts/crisis_eval.py --set probe --inside dictated   # each line inside a long message
    .venv/bin/python scripts/crisis_eval.py --set conversations   # sessions read message by message
"""

import argparse
import os
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coaching_site.settings")

import django

django.setup()

from agents.safety import classifier, embedding, evaluation, pregate, reading  # noqa: E402

Folds = list[tuple[Any, Any]]  # (training row indices, scored row indices) per fit
MakeFolds = Callable[[list[str], list[str], list[str]], Folds]  # (languages, labels, files) -> folds


def row_folds(langs: list[str], labels: list[str], files: list[str]) -> Folds:
    """Five folds of rows, stratified by language and label: a writer's other rows are trained on."""
    import numpy as np
    from sklearn.model_selection import StratifiedKFold

    strata = [f"{lang}/{label}" for lang, label in zip(langs, labels, strict=True)]
    return list(StratifiedKFold(n_splits=5, shuffle=True, random_state=0).split(np.zeros(len(labels)), strata))


def writer_folds(langs: list[str], labels: list[str], files: list[str]) -> Folds:
    """Each written_* file (one writer's messages) scored by a fit on all the others: how the
    classifier reads wording of a writer it never saw, which row folds flatter (a writer's
    phrasings recur across their rows). training.tsv (short phrases) is always trained on."""
    import numpy as np

    names = np.array(files)
    return [(np.where(names != held)[0], np.where(names == held)[0]) for held in sorted(set(files) - {"training"})]


def out_of_fold_scores(make_folds: MakeFolds = row_folds) -> tuple[Any, Any, Any, Any, Any, Any]:
    """Every scored training row scored by a fit that never saw it: (labels, crisis, distress,
    category, long enough, informational), numpy arrays; a row no fold scores stays out of all
    of them."""
    import numpy as np

    files, langs, labels, texts = [], [], [], []
    for path in classifier.TRAINING_FILES:
        file_langs, file_labels, file_texts = classifier.read_training_data((path,))
        files += [path.stem] * len(file_texts)
        langs += file_langs
        labels += file_labels
        texts += file_texts
    embeddings = embedding.embed(texts)
    crisis, distress = np.zeros(len(texts)), np.zeros(len(texts))
    category = np.empty(len(texts), dtype=object)
    folds = make_folds(langs, labels, files)
    for train, test in folds:
        fitted = classifier.fit([texts[i] for i in train], [labels[i] for i in train], embeddings=embeddings[train])
        detector = classifier.Detector(fitted)
        for i in test:
            score = detector.score(texts[i])
            crisis[i], distress[i], category[i] = score.crisis, detector.distress(texts[i]), score.category
    long_enough = np.array([not classifier.too_short(text) for text in texts])
    informational = np.array([reading.informational(reading.readings(text).all()) for text in texts])
    scored = np.sort(np.concatenate([test for _, test in folds]))  # row folds: every row, in order
    return (
        np.array(labels)[scored],
        crisis[scored],
        distress[scored],
        category[scored],
        long_enough[scored],
        informational[scored],
    )


def cross_validate(
    make_folds: MakeFolds = row_folds, thresholds: tuple[float, ...] = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9)
) -> None:
    """Recall on crisis rows and false positives on everyday rows of the training set, each row
    scored by a fit that never saw it: how the thresholds are chosen without any evaluation set.
    Then the context rule (a question about means or not eating after distress earlier in the
    session) on conversations made of those rows."""
    import numpy as np

    labels, crisis, distress, category, long_enough, informational = out_of_fold_scores(make_folds)
    is_crisis = np.isin(labels, classifier.CATEGORIES)

    def rates(flagged: Any, rows: Any) -> str:
        hits, misses = flagged & rows & is_crisis, flagged & rows & ~is_crisis
        crisis_rows, everyday_rows = (rows & is_crisis).sum(), (rows & ~is_crisis).sum()
        return (
            f"{hits.sum() / max(1, crisis_rows):.1%} ({hits.sum()}/{crisis_rows}) | "
            f"{misses.sum() / max(1, everyday_rows):.1%} ({misses.sum()}/{everyday_rows})"
        )

    every_row = np.ones(len(labels), dtype=bool)
    print("| threshold | recall (crisis rows) | false positives (everyday rows) |\n| --- | --- | --- |")
    for threshold in thresholds:
        print(f"| {threshold} | {rates((crisis >= threshold) & long_enough, every_row)} |")

    # Informational rows (news, questions about someone else, fiction: reading.informational)
    # are held to a higher bar; its rows alone, then every row with both bars.
    print(
        "\n| informational bar (others at the main threshold) | recall, informational rows "
        "| false positives, informational rows | recall, all rows | false positives, all rows |"
        "\n| --- | --- | --- | --- | --- |"
    )
    for bar in (classifier.THRESHOLD, 0.85, 0.9, 0.95):
        flagged = (crisis >= np.where(informational, bar, classifier.THRESHOLD)) & long_enough
        print(f"| {bar} | {rates(flagged, informational)} | {rates(flagged, every_row)} |")

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


# Ordinary coaching talk for --inside: the training data's batch 6 lines labelled none. The
# classifier knows them as ordinary, so this measures whether a set's line is still found inside
# a long message; the false positives it shows come from the set's everyday lines, inside.
COACHING_LINES = classifier.TRAINING_DIR / "written_b6_coaching.tsv"


def inside_coaching(rows: list[evaluation.Row], style: str, seed: int = 6) -> list[evaluation.Row]:
    """Each row in the middle of four ordinary coaching lines of its language, as one message of
    ~400 characters: does a crisis line still bring the card when a coachee says it in passing,
    in a long message? "dictated": lower case without punctuation, as speech-to-text or a hurried
    phone gives it (one run of words, no sentence ends)."""
    langs, labels, texts = classifier.read_training_data([COACHING_LINES])
    padding: dict[str, list[str]] = {}
    for lang, label, text in zip(langs, labels, texts, strict=True):
        if label == "none":
            padding.setdefault(lang, []).append(text)
    rng = random.Random(seed)  # noqa: S311 (a fixed sample, not a secret)
    long_rows = []
    for row in rows:
        around = rng.sample(padding[row.lang], 4)
        text = " ".join([*around[:2], row.text, *around[2:]])
        if style == "dictated":
            text = " ".join(re.sub(r"[.,!?;:…¡¿]", " ", text.lower()).split())
        long_rows.append(evaluation.Row(row.lang, row.label, row.category, text))
    return long_rows


def conversations_report(name: str, patterns: list[pregate.PatternRow], *, missed: bool) -> None:
    """A conversation set read message by message with the session's earlier messages, as the
    accept path reads it; and once more each message alone, for what the history adds."""
    conversations = evaluation.load_conversations(evaluation.CONVERSATION_SETS[name])
    report = evaluation.evaluate_conversations(
        conversations, lambda text, history: pregate.assess(text, patterns, history)
    )
    alone = evaluation.evaluate_conversations(conversations, lambda text, history: pregate.assess(text, patterns))
    print(evaluation.format_conversation_report(report))
    c, f = alone.caught["all"], alone.flagged["all"]
    print(
        f"\neach message read alone: caught {c.rate:.1%} ({c.hits}/{c.total}), "
        f"flagged {f.rate:.1%} ({f.hits}/{f.total})"
    )
    if missed:
        print("\nmissed:")
        for conversation in report.missed:
            print(f"  [{conversation.id} {conversation.lang}/{conversation.category} risk_at {conversation.risk_at}]")
            for i, text in enumerate(conversation.messages):
                print(f"    {i}: {text}")
        print("flagged:")
        for conversation, i in report.false_alarms:
            where = f"{conversation.id} {conversation.lang}/{conversation.category} message {i}"
            print(f"  [{where}] {conversation.messages[i]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--missed", action="store_true", help="list the missed and the wrongly flagged messages")
    parser.add_argument("--layer", choices=["pattern", "classifier", "both"], default="both")
    sets = {**evaluation.SETS, **evaluation.CONVERSATION_SETS}
    parser.add_argument(
        "--set",
        choices=list(sets),
        default="evaluation",
        help="; ".join(f"{name}: tests/data/{files}" for name, files in sets.items()),
    )
    parser.add_argument(
        "--inside",
        choices=["punctuated", "dictated"],
        help="each line of the set inside four ordinary coaching lines, as one long message",
    )
    parser.add_argument("--cv", action="store_true", help="5-fold cross-validation of the classifier on training data")
    parser.add_argument(
        "--cv-writers", action="store_true", help="cross-validation leaving each writer's training file out in turn"
    )
    args = parser.parse_args()
    if args.cv or args.cv_writers:
        cross_validate(writer_folds if args.cv_writers else row_folds)
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

    if args.set in evaluation.CONVERSATION_SETS:
        conversations_report(args.set, patterns, missed=args.missed)
        return
    rows = evaluation.load_eval_set(pattern=evaluation.SETS[args.set])
    if args.inside:
        rows = inside_coaching(rows, args.inside)
    report = evaluation.evaluate(rows, detect)
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
