"""Drops from a new batch of written crisis lines (training or a new evaluation set) every line
that matches, or nearly matches, a line already in the training data or in any evaluation set,
without printing any of them: a blind set must stay unread, and a training line close to an
evaluation line would flatter the figures.

    .venv/bin/python scripts/crisis_data_filter.py NEW.tsv KEPT.tsv
    .venv/bin/python scripts/crisis_data_filter.py NEW.jsonl KEPT.jsonl   # conversations

The text is the last tab-separated field of each line; "nearly" is a difflib ratio above 0.9
on the normalised text (`reading.normalise`), the same text the overlap test compares exactly.
A conversation (evaluation.Conversation, a JSON line) is dropped when one of its messages of
five words or more is (a short "ok, thanks" says nothing about who wrote it).
"""

import argparse
import difflib
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "coaching_site.settings")

import django

django.setup()

from agents.safety import classifier, evaluation, reading  # noqa: E402

NEAR = 0.9


def known_texts() -> list[str]:
    _, _, training = classifier.read_training_data()
    return sorted({reading.normalise(text) for text in training + evaluation.unseen_texts()})


def texts_of(line: str, *, conversations: bool) -> list[str]:
    """What is compared: a line's text, or a conversation's messages of five words or more."""
    if not conversations:
        return [line.split("\t")[-1]]
    return [text for text in json.loads(line)["messages"] if not classifier.too_short(text)]


def near_any(text: str, known: list[str]) -> bool:
    matcher = difflib.SequenceMatcher(None, text)  # seq2 is cached: set once, compared to many
    matcher.set_seq2(text)
    for other in known:
        matcher.set_seq1(other)
        # The quick ratios are upper bounds of ratio(): most pairs are ruled out without it.
        if matcher.real_quick_ratio() > NEAR and matcher.quick_ratio() > NEAR and matcher.ratio() > NEAR:
            return True
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("new", type=Path)
    parser.add_argument("kept", type=Path)
    args = parser.parse_args()
    known = known_texts()
    conversations = args.new.suffix == ".jsonl"
    exact = set(known)
    kept, same, near = [], 0, 0
    for line in args.new.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            kept.append(line)
            continue
        texts = [reading.normalise(text) for text in texts_of(line, conversations=conversations)]
        if any(text in exact for text in texts):
            same += 1
        elif any(near_any(text, known) for text in texts):
            near += 1
        else:
            kept.append(line)
    args.kept.write_text("\n".join(kept) + "\n", encoding="utf-8")
    print(f"dropped {same} matching and {near} near lines; kept {len(kept)} lines in {args.kept}")


if __name__ == "__main__":
    main()
