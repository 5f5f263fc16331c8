"""The crisis pre-gate: recognises crisis language in a coachee's message before any model runs.

No LLM is involved, so it works when every model endpoint is down, and it answers within
the request that stored the message. Every active pattern is checked whatever the session's
locale: people write in the language they are in, not the one they signed up with.
"""

import functools
import itertools
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

import re2

from agents.models import CrisisCategory, CrisisPattern, Escalation, Message, Role

# How the pre-gate reads text (the classifier reads it so too).
from agents.safety.reading import CYRILLIC_LETTER, fold, informational, readings, skeleton, variants

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CrisisMatch:
    locale: str
    pattern: str
    pattern_id: int | None = None
    category: str = CrisisCategory.SUICIDE


# (id, locale, pattern, category) of an active crisis pattern, as the turn setup keeps them.
PatternRow = tuple[int, str, str, str]


@functools.lru_cache(maxsize=4096)
def pattern_regex_source(pattern: str) -> str:
    """A pattern as compiled: folded; one written in Cyrillic becomes its Latin skeleton (it is
    then matched against the skeleton variant of a message, whichever script that used)."""
    folded = fold(pattern)
    return skeleton(folded) if CYRILLIC_LETTER.search(folded) else folded


@functools.lru_cache(maxsize=4096)
def compiled(pattern: str) -> re.Pattern[str] | None:
    # Cached: folding ~120 patterns took ~1.5 ms of every accepted message (re's own cache
    # is keyed by the folded text, so it did not spare the folding).
    try:
        return re.compile(pattern_regex_source(pattern), re.IGNORECASE)
    except re.error:
        return None  # an invalid pattern saved past validation must not block the others


def active_crisis_patterns() -> list[PatternRow]:
    """(id, locale, pattern, category) of every active crisis pattern."""
    return list(CrisisPattern.objects.filter(active=True).values_list("id", "locale", "pattern", "category"))


_CHAR_CLASS = re.compile(r"\[[^\]]*\]|\(\?<?[!=][^)]*\)")  # character classes and lookarounds


@functools.lru_cache(maxsize=4096)
def is_keyword(pattern: str) -> bool:
    """A pattern for one word (no space outside character classes and lookarounds): "suicid"."""
    return " " not in _CHAR_CLASS.sub("", pattern).replace(" ?", "")  # "селф ?харм" is one word too


# RE2 runs every pattern over the text in one linear pass (a set), where Python's re would run
# ~500 backtracking searches: ~170 ms for a 4,000-character message against well under 1 ms.
# RE2 lacks lookarounds and Unicode \b, so it only preselects: each pattern is loosened for it
# (lookarounds and \b dropped, \w made Unicode), which can only match more, and a preselected
# pattern is then confirmed with Python's re. A pattern RE2 cannot read is always checked.
def _without_lookarounds(source: str) -> str:
    """The pattern with every lookahead and lookbehind group removed, however deeply nested."""
    out: list[str] = []
    depth = 0  # > 0 while inside a lookaround group being dropped
    index = 0
    in_class = False
    while index < len(source):
        char = source[index]
        if char == "\\":
            if not depth:
                out.append(source[index : index + 2])
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(" and (depth or source.startswith(("(?=", "(?!", "(?<=", "(?<!"), index)):
            depth += 1
            index += 1
            continue
        elif char == ")" and depth:
            depth -= 1
            index += 1
            continue
        if not depth:
            out.append(char)
        index += 1
    return "".join(out)


# A counted repeat ("x{0,40}") becomes "x*": it can only match more, and RE2's automaton for ~750
# patterns with counted gaps was 3-4 times slower on a 4,000-character message than with open ones.
_COUNTED = re.compile(r"(?<!\\)\{\d+(,\d*)?\}")


def _loosened(source: str) -> str:
    source = _COUNTED.sub("*", _without_lookarounds(source)).replace("\\b", "")
    return source.replace("\\w", "[\\pL\\pN_]").replace("\\W", "[^\\pL\\pN_]")


class _Prefilter:
    def __init__(self, sources: tuple[str, ...]) -> None:
        options = re2.Options()
        options.case_sensitive = False
        # ~750 patterns with bounded gaps (".{0,40}") outgrow RE2's default 8 MB program budget.
        options.max_mem = 256 << 20
        self.set = re2.Set.SearchSet(options)
        self.index: list[int] = []  # RE2's pattern number → position in `sources`
        self.always: list[int] = []
        for position, source in enumerate(sources):
            try:
                self.set.Add(_loosened(source))
            except Exception:
                self.always.append(position)
            else:
                self.index.append(position)
        self.set.Compile()

    def candidates(self, texts: list[str]) -> list[int]:
        hits = set(self.always)
        for text in texts:
            hits.update(self.index[number] for number in self.set.Match(text) or ())
        return sorted(hits)


@functools.lru_cache(maxsize=8)
def _prefilter(sources: tuple[str, ...]) -> _Prefilter:
    return _Prefilter(sources)


def warm_patterns(patterns: list[PatternRow]) -> None:
    """Build the RE2 set for these patterns now (an operator's edit makes a new set)."""
    _prefilter(tuple(pattern_regex_source(row[2]) for row in patterns))


def warm(patterns: list[PatternRow]) -> None:
    """Build the RE2 set and load the classifier (and fit whose.py's reading, ~1 s) now, not on
    the first accepted message. For the process that accepts messages: a Celery worker never
    runs the pre-gate, and must not hold the classifier and its encoder (~1.5 s and ~100 MB a
    process) for nothing."""
    from agents.safety import classifier, whose

    warm_patterns(patterns)
    classifier.warm()
    whose.warm()


def warm_at_startup() -> None:
    """For the ASGI process: the pre-gate ready before the first message (a cold classifier
    fit or RE2 set build inside that message's request would cost it the one-second card)."""
    try:
        warm(active_crisis_patterns())
    except Exception:
        logger.exception("could not warm the crisis pre-gate at startup; the first message will")


def pregate(text: str, patterns: list[PatternRow] | None = None) -> CrisisMatch | None:
    """The first active pattern the text matches, or None. `patterns`: as active_crisis_patterns
    read them (turn_accept passes its process's kept setup); else read now. A one-word pattern
    does not count in a message that talks about the subject (INFORMATIONAL)."""
    rows = active_crisis_patterns() if patterns is None else patterns
    reading = readings(text)
    candidates = reading.all()
    prefilter = _prefilter(tuple(pattern_regex_source(row[2]) for row in rows))
    about: bool | None = None  # computed only when a keyword pattern matches
    for position in prefilter.candidates(candidates):
        pattern_id, locale, pattern, category = rows[position]
        regex = compiled(pattern)
        if regex is not None and any(regex.search(candidate) for candidate in reading.for_pattern(pattern)):
            if is_keyword(pattern):
                about = informational(candidates) if about is None else about
                if about:
                    continue
            return CrisisMatch(locale, pattern, pattern_id, category)
    return None


# How many earlier coachee messages of the session the detector reads with the current one.
HISTORY_MESSAGES = 3
HISTORY_CHARS = 1000  # of each, the end: what was said last before this message


def recent_coachee_texts(session_id: int, *, before_seq: int | None = None) -> list[str]:
    """The session's last few coachee messages (newest first), before `before_seq` if given."""
    messages = Message.objects.filter(session_id=session_id, role=Role.USER)
    if before_seq is not None:
        messages = messages.filter(seq__lt=before_seq)
    return history_from(messages.order_by("-seq").values_list("text", flat=True)[:HISTORY_MESSAGES])


def history_from(earlier: Iterable[str]) -> list[str]:
    """What `assess` reads of a session's earlier coachee messages, given newest first."""
    return [text[-HISTORY_CHARS:] for text in itertools.islice(earlier, HISTORY_MESSAGES)]


@dataclass(frozen=True)
class CrisisSignal:
    """Why the pre-gate answered with the card: which layer fired, on what, at which level."""

    layer: str  # "pattern" or "classifier"
    category: str
    detail: dict[str, object]
    someone_else: bool = False  # the words tell someone else's crisis (whose.py): the reply speaks to a helper

    @property
    def level(self) -> str:
        # Abuse gets its own resources at "refer" unless the words say danger is immediate;
        # every other category is a crisis.
        if self.category != CrisisCategory.ABUSE:
            return Escalation.CRISIS
        return Escalation.CRISIS if self.detail.get("immediate") else Escalation.REFER

    def record(self) -> dict[str, object]:
        return {
            "layer": self.layer,
            "category": self.category,
            "level": self.level,
            "someone_else": self.someone_else,
            **self.detail,
        }

    def reason(self) -> str:
        if self.layer == "pattern":
            return f"crisis language ({self.detail.get('locale')} pre-gate, pattern {self.detail.get('pattern_id')})"
        features = self.detail.get("features")
        named = ", ".join(map(repr, features)) if isinstance(features, list) else ""
        return f"crisis language (classifier {self.detail.get('score')}: {named})"[:200]


# Danger now, in any language: a weapon, a threat to kill, being locked in or hiding.
_IMMEDIATE = re.compile(
    r"\b(knife|gun|weapon|kill me|right now|hiding|locked|messer|umbringen|bringt mich um|couteau|me tuer|"
    r"cuchillo|matarme|me matar|faca|nozh|ubiet|ubit|zaperla|zaper|ostanovitsia|strangl|chok|wurg|etrangl|"
    r"estrangul|dushil)"
)


def _immediate(text: str) -> bool:
    return any(_IMMEDIATE.search(variant) for variant in variants(text))


def assess(
    text: str, patterns: list[PatternRow] | None = None, history: list[str] | None = None
) -> CrisisSignal | None:
    """Both layers of the pre-gate: the patterns, then the classifier (which also reads the
    session's last few coachee messages, `history`, newest first). None: no crisis signal.
    A signal also says how likely the words tell someone else's crisis (whose.py)."""
    from agents.safety import classifier, whose

    match = pregate(text, patterns)
    if match is not None:
        detail: dict[str, object] = {"pattern_id": match.pattern_id, "pattern": match.pattern, "locale": match.locale}
        layer, category = "pattern", match.category
    else:
        hit = classifier.classify(text, history)
        if hit is None:
            return None
        detail, layer, category = hit.detail(), "classifier", hit.category
    if category == CrisisCategory.ABUSE:
        detail["immediate"] = _immediate(text)
    probability = whose.someone_else(text)
    detail["someone_else_probability"] = round(probability, 3)
    return CrisisSignal(layer, category, detail, someone_else=probability >= whose.THRESHOLD)
