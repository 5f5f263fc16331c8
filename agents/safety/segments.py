"""How the classifier cuts a message into the segments it reads: the message's end (MAX_CHARS),
whole when it is short, else sentences joined into pieces, and a run of words without sentence
ends in overlapping windows; and which segments are worth reading at all (`readable`)."""

import re

# Long messages are scored in pieces (the most worrying piece counts), so a crisis sentence
# inside 4,000 characters of something else is not diluted away: a message up to CHUNK_CHARS is
# one piece; a longer one is cut at sentence ends, short sentences joined up to PIECE_CHARS
# ("I lost my job. I don't see the point." reads as one thought). A run of words with no sentence
# end (dictated, typed on a phone) is read in windows of RUN_WINDOW_CHARS at word boundaries,
# starting every half window over its last RUN_OVERLAP_CHARS, so a phrase is not cut in two and
# a window holds about one thought: on crisis lines of the development sets (probe, blind set 1)
# said in the middle of four ordinary coaching lines with no punctuation (scripts/crisis_eval.py
# --inside dictated), both layers caught 47.9 / 52.5 % with a cut every 240 characters mid-word,
# 78.8 / 70.4 % in windows (the lines alone: 88-90 %). Sentences read alone (joined only under
# 40 characters) were tried too: +4 points on punctuated long messages (probe), but a coaching
# line's "ich mach mich deswegen nicht mehr so fertig" read alone brought the card (ordinary
# coaching 3.0 -> 3.3 %, over its limit): not adopted.
CHUNK_CHARS = 240
PIECE_CHARS = 100
RUN_WINDOW_CHARS = 120
# Overlapping windows double the n-grams' work (~5 ms per 1,000 characters): they overlap over
# a run's last this many characters, and tile the part before it, so a run of MAX_CHARS costs
# 1.5 times its length, not twice (4,000 dictated characters: p50 16-23 ms overlapped all through,
# over the 20 ms budget in two of six runs).
RUN_OVERLAP_CHARS = 1000
# The classifier reads the last this many characters (the patterns read it all): its n-grams
# cost ~5 ms per 1,000 characters on this 2-core machine, and accept has a 20 ms budget.
MAX_CHARS = 2000
_SENTENCE = re.compile(r"(?<=[.!?;\n])\s+")


def sentences_of(text: str) -> list[str]:
    """The sentences of a message, split after . ! ? ; or a line break."""
    return _SENTENCE.split(text.strip())


def chunks(text: str) -> list[str]:
    """The message whole if it is short, else pieces of a sentence or two (at most CHUNK_CHARS)
    and, for a run of words without sentence ends, overlapping windows of it."""
    text = text[-MAX_CHARS:]
    if len(text) <= CHUNK_CHARS:
        return [text]
    pieces: list[str] = []
    current = ""
    for sentence in _SENTENCE.split(text):
        if len(sentence) > CHUNK_CHARS:
            if current:
                pieces.append(current)
                current = ""
            pieces.extend(windows(sentence))
            continue
        if current and (len(current) >= PIECE_CHARS or len(current) + len(sentence) > CHUNK_CHARS):
            pieces.append(current)
            current = ""
        current = f"{current} {sentence}" if current else sentence
    if current:
        pieces.append(current)
    return pieces or [""]


def windows(run: str, size: int = RUN_WINDOW_CHARS) -> list[str]:
    """Windows of whole words, at most `size` characters each (a longer word is cut), one
    starting at the first word past each half window (before the run's last RUN_OVERLAP_CHARS:
    past each window), the last one ending with the run."""
    words = run.split()
    starts = [0]  # where each word starts in the windows' text: the words joined by one space
    for word in words[:-1]:
        starts.append(starts[-1] + len(word) + 1)
    overlap_from = starts[-1] + len(words[-1]) - RUN_OVERLAP_CHARS if words else 0
    pieces = []
    first = 0
    while first < len(words):
        last, length = first + 1, len(words[first])
        while last < len(words) and length + 1 + len(words[last]) <= size:
            length += 1 + len(words[last])
            last += 1
        pieces.append(" ".join(words[first:last])[:size])
        if last == len(words):
            break
        step = size // 2 if starts[first] >= overlap_from else size
        first = next((i for i in range(first + 1, last) if starts[i] >= starts[first] + step), last)
    return pieces


_LETTER = re.compile(r"[^\W\d_]")
_LATIN_OR_CYRILLIC = re.compile(r"[A-Za-z\u00C0-\u024F\u1E00-\u1EFF\u0400-\u052F]")
# A piece is read when most of its letters are of the scripts the product's languages use:
# the embedding of random characters or another script lands anywhere, crisis rows included.
MIN_READABLE_SHARE = 0.6


def readable(piece: str) -> bool:
    letters = len(_LETTER.findall(piece))
    return letters > 0 and len(_LATIN_OR_CYRILLIC.findall(piece)) >= MIN_READABLE_SHARE * letters
