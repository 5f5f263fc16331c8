"""Measuring the crisis pre-gate on the evaluation set (tests/data/crisis_eval_*.tsv).

The evaluation set is kept apart from the training set (agents/safety/data/training.tsv) and
was written before any tuning: see the README ("How the crisis sets were made"). Recall is
counted on crisis messages, false positives on everyday ones, per language and per category.
"""

from __future__ import annotations

import importlib
import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agents.safety import classifier, pregate, segments

EVAL_DIR = Path(__file__).resolve().parents[2] / "tests" / "data"
LANGUAGES = ("en", "ru", "de", "pt", "fr", "es")
# Every set the detector is measured on, by name (scripts/crisis_eval.py --set NAME), each a file
# pattern under EVAL_DIR; none may share a line with the training data (a test checks them all).
# The blind sets of single messages (1, 3-24), all spent, are training data since 2026-12-07
# (agents/safety/data/blind_set_*.tsv; docs/crisis-safety.md, "Training on the spent blind sets").
SETS = {
    "evaluation": "crisis_eval_*.tsv",
    "holdout": "crisis_holdout.tsv",
    "probe": "crisis_probe.tsv",
    "long": "crisis_long.tsv",  # development: long messages, written as training and not trained on
    "pieces": "crisis_pieces.tsv",  # development: batch 12's pieces (helpers, hard negatives), not trained on
    "plans": "crisis_plans.tsv",  # development: batch 15's concrete plans and look-alikes, not trained on
    "coaching": "crisis_coaching_everyday.tsv",
    "blind25": "crisis_blind25.tsv",  # decided blind sets 23 and 24 as training (crisis-safety.md); misses never read
    "blind26": "crisis_blind26.tsv",  # decided a long message's piece read by sentence (not adopted); misses never read
    "blind27": "crisis_blind27.tsv",  # decided blind sets 25 and 26 as training (not adopted); misses never read
    "blind28": "crisis_blind28.tsv",  # decided the same, again (not adopted); misses never read
    "blind29": "crisis_blind29.tsv",  # decided short messages at a lower bar (not adopted); misses never read
    "blind30": "crisis_blind30.tsv",  # decided short messages at a lower bar, again (adopted); misses never read
    "blind31": "crisis_blind31.tsv",  # decided blind sets 25-30 as training (not adopted); misses never read
    "blind32": "crisis_blind32.tsv",  # decided 5-7-word messages at a lower bar (adopted); misses never read
    "blind33": "crisis_blind33.tsv",  # decided blind sets 31 and 32 as training (not adopted); misses never read
    "blind34": "crisis_blind34.tsv",  # decided blind sets 31-33 as training (not adopted); misses never read
    "blind35": "crisis_blind35.tsv",  # decided, with 36, the long pieces' model (not adopted); English lines seen
    "blind36": "crisis_blind36.tsv",  # decided, with 35, the long pieces' model (not adopted); misses never read
    "blind37": "crisis_blind37.tsv",  # read with and without the long pieces' model; misses never read
    "blind38": "crisis_blind38.tsv",  # long messages only: decided the long pieces' model (not adopted)
}


# Conversations (JSON Lines, one conversation a line: id, lang, label, category, risk_at,
# messages): the coachee's messages of one session in order, each read as the accept path reads
# it, with the ones before it (pregate.history_from). A crisis conversation's risk shows from
# message `risk_at` on, often only in the light of what came before.
CONVERSATION_SETS = {
    "conversations": "crisis_conversations_dev.jsonl",  # development: may be read
    "conversations_blind": "crisis_conversations_blind.jsonl",  # first reading of sessions; misses never read
    "conversations_blind2": "crisis_conversations_blind2.jsonl",  # decided batch 14; misses never read
    "conversations_blind3": "crisis_conversations_blind3.jsonl",  # decided batch 14's second question
    "conversations_blind4": "crisis_conversations_blind4.jsonl",  # decided the clear-distress rule (not adopted)
    "conversations_blind5": "crisis_conversations_blind5.jsonl",  # decided batch 15 (plans) with blind17
    "conversations_blind6": "crisis_conversations_blind6.jsonl",  # decided pattern batch 6 (not adopted)
}


@dataclass(frozen=True)
class Row:
    lang: str
    label: str  # "crisis" or "everyday"
    category: str
    text: str


def load_eval_set(directory: Path = EVAL_DIR, pattern: str = "crisis_eval_*.tsv") -> list[Row]:
    """The evaluation set; pattern="crisis_holdout.tsv": the small held-out set, written after
    the evaluation set had informed the patterns, and never used for tuning."""
    rows = []
    for path in sorted(directory.glob(pattern)):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):  # a header says where the set came from
                lang, label, category, text = line.split("\t", 3)
                rows.append(Row(lang, label, category, text))
    return rows


@dataclass(frozen=True)
class Conversation:
    id: str
    lang: str
    label: str  # "crisis" or "everyday"
    category: str
    risk_at: int | None  # the first message after which a counsellor would show the resources
    messages: tuple[str, ...]


def load_conversations(pattern: str, directory: Path = EVAL_DIR) -> list[Conversation]:
    conversations = []
    for path in sorted(directory.glob(pattern)):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                item = json.loads(line)
                conversations.append(
                    Conversation(
                        item["id"],
                        item["lang"],
                        item["label"],
                        item["category"],
                        item["risk_at"],
                        tuple(item["messages"]),
                    )
                )
    return conversations


def unseen_texts() -> list[str]:
    """Every text the detector is measured on and must never be trained on: each line of every
    set, and each message of five words or more of every session (a short "ok, thanks" says
    nothing about who wrote it, and may well be a training line too)."""
    texts = [row.text for pattern in SETS.values() for row in load_eval_set(pattern=pattern)]
    texts += [
        text
        for pattern in CONVERSATION_SETS.values()
        for conversation in load_conversations(pattern)
        for text in conversation.messages
        if not classifier.too_short(text)
    ]
    return texts


def seeded_patterns() -> list[pregate.PatternRow]:
    """The crisis patterns the seed migrations leave in a fresh database, without one."""
    batch1 = importlib.import_module("agents.migrations.0007_seed_crisis_patterns").PATTERNS
    batch2 = importlib.import_module("agents.migrations.0014_crisis_patterns_batch_2")
    batch3 = importlib.import_module("agents.migrations.0018_crisis_languages")
    batch4 = importlib.import_module("agents.migrations.0020_crisis_patterns_batch_4")
    narrowed = importlib.import_module("agents.migrations.0021_crisis_patterns_narrowed")
    batch5 = importlib.import_module("agents.migrations.0028_crisis_patterns_batch_5")
    clause_end = importlib.import_module("agents.migrations.0029_crisis_patterns_german_clause_end")
    quitting = importlib.import_module("agents.migrations.0030_crisis_patterns_russian_quitting")
    rows: dict[tuple[str, str], str] = {}
    for locale, patterns in batch1.items():
        for pattern in patterns:
            rows[(locale, batch2.REPLACED.get(locale, {}).get(pattern, pattern))] = "suicide"
    for locale, patterns in batch2.ADDED.items():
        for pattern in patterns:
            rows[(locale, pattern)] = "suicide"
    _narrow(rows, batch3.REPLACED)
    for locale, categories in batch3.PATTERNS.items():  # batch 3 re-seeded the categories too
        for category, patterns in categories.items():
            for pattern in patterns:
                rows[(locale, pattern)] = category
    _narrow(rows, batch4.REPLACED)
    _add_new(rows, batch4.PATTERNS)
    _narrow(rows, narrowed.REPLACED)
    _narrow(rows, batch5.REPLACED)
    _add_new(rows, batch5.PATTERNS)
    _add_new(rows, clause_end.PATTERNS)
    _narrow(rows, quitting.REPLACED)
    return [(index, locale, pattern, category) for index, ((locale, pattern), category) in enumerate(rows.items())]


def _narrow(rows: dict[tuple[str, str], str], replaced: dict[tuple[str, str], str]) -> None:
    """As the migrations' replace_patterns: a seeded pattern replaced by its narrower form."""
    for (locale, old), new in replaced.items():
        if (locale, old) in rows:
            rows[(locale, new)] = rows.pop((locale, old))


def _add_new(rows: dict[tuple[str, str], str], patterns: dict[str, dict[str, list[str]]]) -> None:
    """As the migrations' add_patterns: a batch added only where (locale, pattern) is new."""
    for locale, categories in patterns.items():
        for category, listed in categories.items():
            for pattern in listed:
                rows.setdefault((locale, pattern), category)


@dataclass
class Tally:
    hits: int = 0
    total: int = 0

    @property
    def rate(self) -> float:
        return self.hits / self.total if self.total else 0.0


@dataclass
class Report:
    recall: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))  # by language, "all"
    false_positives: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    by_category: dict[str, Tally] = field(
        default_factory=lambda: defaultdict(Tally)
    )  # crisis: caught; everyday: flagged
    # crisis or everyday, short (read whole) or long (read in pieces): caught or flagged
    by_length: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    by_layer: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    # Of the messages that got the card, by category: answered as someone else's crisis (whose.py)
    someone_else: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    missed: list[Row] = field(default_factory=list)
    flagged: list[Row] = field(default_factory=list)


def evaluate(rows: list[Row], detect: Callable[[str], pregate.CrisisSignal | None]) -> Report:
    report = Report()
    for row in rows:
        signal = detect(row.text)
        fired = signal is not None
        if signal is not None and row.label == "crisis":
            report.by_layer[signal.layer] += 1
        if signal is not None:
            answered = report.someone_else[f"{row.label}/{row.category}"]
            answered.total += 1
            answered.hits += signal.someone_else
        table = report.recall if row.label == "crisis" else report.false_positives
        for key in (row.lang, "all"):
            table[key].total += 1
            table[key].hits += fired
        category = report.by_category[f"{row.label}/{row.category}"]
        category.total += 1
        category.hits += fired
        length = report.by_length[f"{row.label}/{'long' if len(row.text) > segments.CHUNK_CHARS else 'short'}"]
        length.total += 1
        length.hits += fired
        if row.label == "crisis" and not fired:
            report.missed.append(row)
        if row.label != "crisis" and fired:
            report.flagged.append(row)
    return report


def _tally_lines(tallies: dict[str, Tally]) -> list[str]:
    return [
        f"| {name} | {tallies[name].rate:.1%} ({tallies[name].hits}/{tallies[name].total}) |"
        for name in sorted(tallies)
    ]


def format_report(report: Report) -> str:
    lines = ["| language | recall | false positives |", "| --- | --- | --- |"]
    for lang in (*LANGUAGES, "all"):
        r, f = report.recall[lang], report.false_positives[lang]
        lines.append(f"| {lang} | {r.rate:.1%} ({r.hits}/{r.total}) | {f.rate:.1%} ({f.hits}/{f.total}) |")
    lines += ["", "| category | flagged |", "| --- | --- |", *_tally_lines(report.by_category)]
    lines += ["", f"| length (long: over {segments.CHUNK_CHARS} characters) | flagged |", "| --- | --- |"]
    lines += _tally_lines(report.by_length)
    lines += [
        "",
        "crisis messages caught by layer: " + ", ".join(f"{k} {v}" for k, v in sorted(report.by_layer.items())),
        "",
        "| of the messages with the card | answered as someone else's crisis |",
        "| --- | --- |",
        *_tally_lines(report.someone_else),
    ]
    return "\n".join(lines)


@dataclass
class ConversationReport:
    # Crisis conversations with the card on a message from risk_at on, and on risk_at itself.
    caught: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))  # by language, "all"
    on_time: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    # Crisis conversations with the card before risk_at (distress read as crisis).
    early: Tally = field(default_factory=Tally)
    # Everyday conversations with the card on any message, and their messages with it.
    flagged: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    flagged_messages: Tally = field(default_factory=Tally)
    by_category: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    # How the caught conversations were caught: the layer, and whether the earlier messages
    # decided it (the current one alone reads no crisis).
    by_layer: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    missed: list[Conversation] = field(default_factory=list)
    false_alarms: list[tuple[Conversation, int]] = field(default_factory=list)  # and the message


def evaluate_conversations(
    conversations: list[Conversation], detect: Callable[[str, list[str]], pregate.CrisisSignal | None]
) -> ConversationReport:
    """Each conversation read message by message, as a session is: `detect(text, history)`."""
    report = ConversationReport()
    for conversation in conversations:
        messages = conversation.messages
        signals = [detect(text, pregate.history_from(reversed(messages[:i]))) for i, text in enumerate(messages)]
        cards = [i for i, signal in enumerate(signals) if signal is not None]
        if conversation.label == "crisis":
            risk_at = conversation.risk_at or 0
            later = [signal for signal in signals[risk_at:] if signal is not None]
            fired = bool(later)
            for key in (conversation.lang, "all"):
                report.caught[key].total += 1
                report.caught[key].hits += fired
                report.on_time[key].total += 1
                report.on_time[key].hits += risk_at in cards
            report.early.total += 1
            report.early.hits += any(i < risk_at for i in cards)
            if later:
                report.by_layer[later[0].layer] += 1
            else:
                report.missed.append(conversation)
        else:
            fired = bool(cards)
            for key in (conversation.lang, "all"):
                report.flagged[key].total += 1
                report.flagged[key].hits += fired
            report.flagged_messages.total += len(messages)
            report.flagged_messages.hits += len(cards)
            report.false_alarms += [(conversation, i) for i in cards]
        category = report.by_category[f"{conversation.label}/{conversation.category}"]
        category.total += 1
        category.hits += fired
    return report


def format_conversation_report(report: ConversationReport) -> str:
    lines = [
        "| language | crisis conversations caught (from risk_at on) | on the message at risk_at "
        "| everyday conversations flagged |",
        "| --- | --- | --- | --- |",
    ]
    for lang in (*LANGUAGES, "all"):
        c, t, f = report.caught[lang], report.on_time[lang], report.flagged[lang]
        lines.append(
            f"| {lang} | {c.rate:.1%} ({c.hits}/{c.total}) | {t.rate:.1%} ({t.hits}/{t.total}) "
            f"| {f.rate:.1%} ({f.hits}/{f.total}) |"
        )
    e, m = report.early, report.flagged_messages
    lines += [
        "",
        f"crisis conversations with the card before risk_at: {e.rate:.1%} ({e.hits}/{e.total}); "
        f"messages of everyday conversations with the card: {m.rate:.1%} ({m.hits}/{m.total})",
        "caught by layer (first card from risk_at on): "
        + ", ".join(f"{k} {v}" for k, v in sorted(report.by_layer.items())),
        "",
        "| category | caught or flagged |",
        "| --- | --- |",
        *_tally_lines(report.by_category),
    ]
    return "\n".join(lines)
