"""The quality gate: deterministic checks on every text a coachee sees.

A 135M-parameter model (the embedded default) regularly answers with its own prompt, with JSON,
with talk about "the response", in a loop, or to "the coach"; a critic model of that size passes
all of it. These checks need no model, so they hold whatever the model is, and they run on
Coach's reply, on Synth's reply before delivery, on what the memory page shows and on what
Shadow writes to the blackboard. Each finding names its check (a stable id, counted for
operators) and says in a few words what was wrong, never quoting the coachee.
"""

from __future__ import annotations

import functools
import itertools
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agents.safety.quality.lexicon import META_TALK, RISK_TOPICS, ROLE_CONFUSION
from agents.safety.quality.unsafe import unsafe_content
from agents.safety.reading import fold

# Stable ids of the checks, with what each catches (shown to operators beside the counts).
CHECKS: dict[str, str] = {
    "empty": "empty or nearly empty text",
    "structured": "JSON, braces, code, markup or identifiers instead of sentences",
    "prompt_echo": "a line of the system's own prompt, a heading or a data fence repeated back",
    "meta_talk": 'talk about "the response", "the JSON", "the brief", the user or the agents',
    "language": "written in another language than the coachee's",
    "repetition": "a loop: the same words or sentences over and over",
    "role_confusion": "addresses the coachee as the coach, or speaks as the coachee",
    "blocked_move": "uses a coaching move blocked for this coachee",
    "risk_behaviour": "encourages a behaviour the coachee's known risks make unsafe",
    "unsafe": "method or means, a diagnosis, medication advice, or claims to be human",
}

# Fewer words than this is not an answer (Coach writes two to four sentences).
MIN_WORDS = 4
MIN_LETTERS = 16
# A run of this many words shared with the system's own wording is an echo, not a coincidence:
# 6-word runs of natural coaching language ("what would it look like if") are rare in our
# prompts, and every echo seen from SmolLM2 repeated a whole prompt line.
ECHO_WORDS = 6
# Headings of the prompt ("Arbitrated brief:") are short; echoed at the start of a line they are junk.
HEADING_MAX_WORDS = 5
# Language is judged only on text long enough for the identifier to be sure.
LANGUAGE_MIN_LETTERS = 40
LANGUAGE_MIN_PROBABILITY = 0.95
PRODUCT_LANGUAGES = ("en", "ru", "de", "pt", "fr", "es")
# Repetition: a 6-word run twice, a 3-word run four times, one word four times in a row, or
# text that compresses to under a third of its size (loops compress well, prose does not).
REPEAT_RUN_WORDS = 6
REPEAT_SHORT_WORDS = 3
REPEAT_SHORT_TIMES = 4
REPEAT_SAME_WORD = 4
COMPRESSION_MIN_CHARS = 240
COMPRESSION_RATIO = 0.33

_WORD = re.compile("[^\\W_]+(?:['\u2019][^\\W_]+)?")
_LETTER = re.compile(r"[^\W\d_]")
_STRUCTURED = [
    (re.compile(r"[{}]"), "braces"),
    (re.compile(r'"[^"\n]{1,40}"\s*:'), "a JSON key"),
    (re.compile(r"```|<\|[a-z_]+\|>|</?(think|assistant|user|system|s)>", re.IGNORECASE), "code or model markup"),
    (re.compile("<<<|>>>|data>>|<<data|[\u2039\u203a]|\\$\\{"), "a data fence or placeholder"),
    (re.compile(r"\b[a-z]+(?:_[a-z0-9]+)+\b"), "an identifier"),
    (
        re.compile(
            r"^\s*(user|assistant|system|coachee|synth|shadow|persona|plasticity|stability|critic)\s*:", re.I | re.M
        ),
        "a transcript label",
    ),
    (re.compile(r":\s*(null|true|false)\b"), "a JSON value"),
]


@dataclass(frozen=True)
class Finding:
    check: str
    detail: str

    def __str__(self) -> str:
        return f"{self.check}: {self.detail}"


@dataclass(frozen=True)
class BlockedMove:
    """A move blocked for this coachee, with the words that show a reply uses it."""

    key: str
    name: str
    cues: tuple[str, ...] = ()


@dataclass(frozen=True)
class Expectations:
    """What a reply is checked against: the system's own wording sent with its request (never
    the fenced data: a coachee's words may be quoted back), the languages it may be in, the
    moves it must not use and the risks it must not feed."""

    wording: tuple[str, ...] = ()
    languages: frozenset[str] = frozenset()
    blocked_moves: tuple[BlockedMove, ...] = ()
    risk_topics: frozenset[str] = frozenset()


@dataclass(frozen=True)
class _WordingIndex:
    runs: frozenset[tuple[str, ...]]  # every ECHO_WORDS-word run of the wording
    headings: frozenset[str]  # its short lines ending in ":"


@functools.lru_cache(maxsize=64)
def _index(wording: tuple[str, ...]) -> _WordingIndex:
    # Cached: a turn's agents share most of their wording, and a prompt is ~2k words.
    lines = [line for text in wording for line in text.splitlines()]
    runs = {gram for line in lines for gram in _grams(_words(line), ECHO_WORDS)}
    headings = {
        " ".join(words)
        for line in lines
        if line.rstrip().endswith(":") and 0 < len(words := _words(line)) <= HEADING_MAX_WORDS
    }
    return _WordingIndex(frozenset(runs), frozenset(headings))


def reply_findings(text: str, expect: Expectations, *, cut_off: bool = False) -> list[Finding]:
    """Everything wrong with a reply to a coachee; empty when it may be shown. `cut_off`: the
    start of a reply whose stream failed (shown with an error): too short is expected there,
    everything else is checked as usual."""
    folded = fold(text)
    words = _words_of_folded(folded)
    if not cut_off and (len(words) < MIN_WORDS or len(_LETTER.findall(text)) < MIN_LETTERS):
        return [Finding("empty", f"{len(words)} words"), *_structured(text)]
    findings = [
        *_structured(text),
        *_echoes(words, folded, expect.wording),
        *_matches("meta_talk", folded, _META_TALK),
        *_repetition(words, text),
        *_matches("role_confusion", folded, _ROLE_CONFUSION),
        *_language(text, expect.languages),
        *_blocked_moves(folded, expect.blocked_moves),
        *_risk_behaviour(folded, expect.risk_topics),
        *(Finding("unsafe", kind.replace("_", " ")) for kind in unsafe_content(text)),
    ]
    return findings


def memory_findings(text: str, wording: tuple[str, ...] = ()) -> list[Finding]:
    """What is wrong with one item the memory page shows (a goal, a priority, a pattern's
    wording): a short phrase, so no length or language judgement, but never markup, prompt
    text, talk about the system or a loop."""
    folded = fold(text)
    words = _words_of_folded(folded)
    if not words:
        return [Finding("empty", "no words")]
    return [
        *_structured(text),
        *_echoes(words, folded, wording),
        *_matches("meta_talk", folded, _META_TALK),
        *_repetition(words, text),
    ]


def topics_in(texts: Iterable[str]) -> frozenset[str]:
    """The risk topics (gambling, alcohol, eating, spending) these texts speak of."""
    folded = [fold(t) for t in texts]
    return frozenset(topic for topic, pattern in _TOPIC_WORDS.items() if any(pattern.search(t) for t in folded))


def language_of(text: str) -> str | None:
    """The product language `text` is written in, when the identifier is sure; else None."""
    if len(_LETTER.findall(text)) < LANGUAGE_MIN_LETTERS:
        return None
    language, probability = _identifier().classify(text)
    return str(language) if probability >= LANGUAGE_MIN_PROBABILITY else None


def summary(findings: Sequence[Finding]) -> str:
    """One line for a flag, a log or a regeneration request."""
    return "; ".join(str(f) for f in findings)


# --- The checks ----------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    return _words_of_folded(fold(text))


def _words_of_folded(folded: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(folded)]


def _grams(words: Sequence[str], n: int) -> Iterable[tuple[str, ...]]:
    return (tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def _any_of(patterns: Sequence[str], flags: int = 0) -> re.Pattern[str]:
    # Compiled once, at import. (One alternation searches about as fast as its patterns one by
    # one in Python's re; what a live check of Coach's stream saved was folding the text once.)
    return re.compile("|".join(f"(?:{p})" for p in patterns), flags)


# Per language, so that a finding can say which language's wording it was.
_META_TALK = {language: _any_of(patterns) for language, patterns in META_TALK.items()}
_ROLE_CONFUSION = {language: _any_of(patterns, re.MULTILINE) for language, patterns in ROLE_CONFUSION.items()}
_TOPIC_WORDS = {topic: _any_of(words["topic"]) for topic, words in RISK_TOPICS.items()}
_RISK_PUSH = {topic: _any_of(words["push"]) for topic, words in RISK_TOPICS.items()}


def _structured(text: str) -> list[Finding]:
    return [Finding("structured", what) for pattern, what in _STRUCTURED if pattern.search(text)][:2]


def _echoes(words: Sequence[str], folded: str, wording: tuple[str, ...]) -> list[Finding]:
    index = _index(wording)
    if any(gram in index.runs for gram in _grams(words, ECHO_WORDS)):
        return [Finding("prompt_echo", f"repeats {ECHO_WORDS}+ words of the prompt")]
    for line in folded.splitlines():
        head = " ".join(_words_of_folded(line.split(":", 1)[0])) if ":" in line else ""
        if head and head in index.headings:
            return [Finding("prompt_echo", "repeats a heading of the prompt")]
    return []


def _matches(check: str, folded: str, table: dict[str, re.Pattern[str]]) -> list[Finding]:
    for language, pattern in table.items():
        if pattern.search(folded):
            return [Finding(check, f"{language} wording")]
    return []


def _repetition(words: Sequence[str], text: str) -> list[Finding]:
    long_runs = Counter(_grams(words, REPEAT_RUN_WORDS))
    if long_runs and long_runs.most_common(1)[0][1] >= 2:
        return [Finding("repetition", f"a {REPEAT_RUN_WORDS}-word run repeats")]
    short_runs = Counter(_grams(words, REPEAT_SHORT_WORDS))
    if short_runs and short_runs.most_common(1)[0][1] >= REPEAT_SHORT_TIMES:
        return [Finding("repetition", f"a {REPEAT_SHORT_WORDS}-word run repeats {REPEAT_SHORT_TIMES}+ times")]
    same = 1
    for previous, word in itertools.pairwise(words):
        same = same + 1 if word == previous else 1
        if same >= REPEAT_SAME_WORD:
            return [Finding("repetition", f"one word {REPEAT_SAME_WORD}+ times in a row")]
    data = text.encode()
    if len(text) >= COMPRESSION_MIN_CHARS and len(zlib.compress(data, 9)) / len(data) < COMPRESSION_RATIO:
        return [Finding("repetition", "the text compresses like a loop")]
    return []


def _language(text: str, allowed: frozenset[str]) -> list[Finding]:
    if not allowed:
        return []
    found = language_of(text)
    if found is None or found in allowed:
        return []
    return [Finding("language", f"written in {found}, expected {'/'.join(sorted(allowed))}")]


def _blocked_moves(folded: str, moves: tuple[BlockedMove, ...]) -> list[Finding]:
    findings = []
    for move in moves:
        phrases = [move.name, move.key.replace("_", " "), *move.cues]
        for phrase in phrases:
            words = _words(phrase)
            if words and re.search(r"\b" + r"\W+".join(map(re.escape, words)) + r"\b", folded):
                findings.append(Finding("blocked_move", move.key))
                break
    return findings


def _risk_behaviour(folded: str, topics: frozenset[str]) -> list[Finding]:
    return [Finding("risk_behaviour", topic) for topic in sorted(topics) if _RISK_PUSH[topic].search(folded)]


@functools.cache
def _identifier() -> Any:
    # py3langid (langid.py's model, bundled in the wheel): ~1 ms a reply, restricted to the
    # languages the product speaks so that a short text is not called Latin or Galician.
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(PRODUCT_LANGUAGES))
    return identifier


def warm() -> None:
    """Load the language identifier and compile the checks' patterns now: Coach's live check runs
    on the ASGI event loop, where a first load (~0.5 s) would hold up every socket of the process."""
    reply_findings(
        "A sentence long enough to be read for its language, with every check of a reply run over it.",
        Expectations(languages=frozenset({"en"})),
    )


def coachee_languages(texts: Sequence[str]) -> frozenset[str]:
    """The language the coachee writes in: of their message when the identifier is sure, else of
    their recent messages together; empty (no language check) when it cannot tell."""
    for text in (texts[0], "\n".join(texts)) if texts else ():
        language = language_of(text)
        if language:
            return frozenset({language})
    return frozenset()
