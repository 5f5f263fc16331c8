"""Turns a spent blind set into training data: once a blind set's first run has decided what it
was written for, its lines may teach the classifier (docs/crisis-safety.md says when they did).
The set moves from tests/data/crisis_blindNN.tsv to agents/safety/data/blind_set_NN.tsv, its
labels mapped to the classifier's and its header saying where it came from; nothing is printed
of its lines (their misses were never read, and are not now).

    .venv/bin/python scripts/crisis_spend.py 25 --decided "blind sets 23 and 24 as training data" \\
        --section "Blind sets 25 and 26 as training data, and blind set 27"

Then take the set out of `evaluation.SETS` and fit (`ensure_safety_models`, or the tests).
"""

import argparse
import datetime
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agents.safety.classifier import CATEGORIES, NOT_CRISIS  # noqa: E402

# A blind set's crisis categories that are the classifier's under another name; its other crisis
# categories are the classifier's own. An everyday line is `distress` when it is one, else `none`.
CRISIS_LABELS = {"ideation": "suicide", "plan": "suicide"}
MAPPING_NOTE = (
    "ideation and plan -> suicide; self_harm, means, eating, abuse as they are; everyday distress -> distress; every\n"
    "# other everyday line (helpers, idioms, news, fiction, ...) -> none."
)


def training_label(verdict: str, category: str) -> str:
    """The classifier's label for a blind set's line (`crisis` or `everyday`, and its category)."""
    if verdict == "crisis":
        label = CRISIS_LABELS.get(category, category)
    elif verdict == "everyday":
        label = "distress" if category == "distress" else "none"
    else:
        raise ValueError(f"unknown verdict {verdict!r}")
    if label not in CATEGORIES + NOT_CRISIS:
        raise ValueError(f"no training label for the crisis category {category!r}")
    return label


def training_lines(blind_set: str) -> list[str]:
    """`lang<TAB>label<TAB>text` for every line of a blind set, in its order; comments dropped."""
    lines = []
    for line in blind_set.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        lang, verdict, category, text = line.split("\t", 3)
        lines.append(f"{lang}\t{training_label(verdict, category)}\t{text}")
    return lines


def header(number: int, *, decided: str, section: str, today: datetime.date) -> str:
    return (
        f"# blind set {number} (tests/data/crisis_blind{number}.tsv until {today}), spent: its first run\n"
        f"# decided what it was written for ({decided}), its misses never read. Trained on since {today}\n"
        f'# (docs/crisis-safety.md, "{section}"); labels mapped: {MAPPING_NOTE}\n'
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("number", type=int, help="the blind set's number (tests/data/crisis_blindNN.tsv)")
    parser.add_argument("--decided", required=True, help="what its first run decided, for the header")
    parser.add_argument("--section", required=True, help="the section of docs/crisis-safety.md that trains on it")
    args = parser.parse_args()
    source = ROOT / "tests" / "data" / f"crisis_blind{args.number}.tsv"
    target = ROOT / "agents" / "safety" / "data" / f"blind_set_{args.number:02d}.tsv"
    if target.exists():
        sys.exit(f"{target.relative_to(ROOT)} exists already: blind set {args.number} is training data.")
    lines = training_lines(source.read_text(encoding="utf-8"))
    head = header(args.number, decided=args.decided, section=args.section, today=datetime.date.today())
    target.write_text(head + "\n".join(lines) + "\n", encoding="utf-8")
    source.unlink()
    print(
        f"{len(lines)} lines: {source.relative_to(ROOT)} -> {target.relative_to(ROOT)}. "
        f"Take blind{args.number} out of evaluation.SETS; the next fit trains on it."
    )


if __name__ == "__main__":
    main()
