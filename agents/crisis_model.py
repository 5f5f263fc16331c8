"""The crisis pre-gate's second layer: a small multilingual text classifier, no model server.

Character n-grams (char_wb 2-5, TF-IDF) and a logistic regression, trained from the files in
agents/safety_data/ (training.tsv: short plain phrases; written_*.tsv: longer, varied chat
messages with hard everyday negatives). Patterns know the phrases they were written for; n-grams
of word pieces carry over to new wording, misspellings and inflections ("umbringen"/"umbr1ngen",
"покончу"/"pokonchu"), and every decision can be explained by the n-grams that weighed most.

Fitted once per version of the training data (and of this code and scikit-learn), then kept on
disk outside the repo, keyed by that hash; training takes one to two seconds on two cores, loading
the cached fit a few tens of milliseconds.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import sklearn
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from agents import safety

logger = logging.getLogger(__name__)

TRAINING_DIR = Path(__file__).parent / "safety_data"
TRAINING_FILES = tuple(sorted(TRAINING_DIR.glob("*.tsv")))
# Bumped when features or the fit change, so an old cached fit is never loaded for new code.
MODEL_VERSION = "1"

# Classes: what is not crisis, and the crisis categories the card and the review name.
NOT_CRISIS = ("none", "distress")
CATEGORIES = ("suicide", "self_harm", "means", "eating", "abuse")

# The card is shown at this crisis probability. Chosen on the training data's own 5-fold
# cross-validation (scripts/crisis_eval.py --cv), never on an evaluation set: with the written_*
# files (~1,250 crisis rows, hard everyday negatives) 0.85 caught 34.7 % of held-out training
# crisis rows at 1.2 % false positives (0.8: 43.2 % at 2.5 %). It is the second layer: it catches
# new wording the patterns miss, and must not add false alarms.
THRESHOLD = 0.85
# A question about means after distress earlier in the session (a loss, hopelessness) needs less.
THRESHOLD_AFTER_DISTRESS = 0.5
DISTRESS_IN_CONTEXT = 0.6
CONTEXT_CATEGORIES = ("means", "eating")
# Long messages are scored in pieces (the most worrying piece counts), so a crisis sentence
# inside 4,000 characters of something else is not diluted away.
CHUNK_CHARS = 240
# The classifier reads the last this many characters (the patterns read it all): its n-grams
# cost ~5 ms per 1,000 characters on this 2-core machine, and accept has a 20 ms budget.
MAX_CHARS = 2000
# Below this many words the classifier stays silent: a short message has too few n-grams to tell
# "I don't know" from a cry for help (it flagged 9 of 54 short everyday lines of a probe set).
# Short crisis wording is the patterns' to catch. Cost on the evaluation set: recall 35.3 % ->
# 34.4 % for this layer alone; none on the held-out set.
MIN_WORDS = 5
_WORDS = re.compile(r"\w+")


def too_short(text: str) -> bool:
    return len(_WORDS.findall(text)) < MIN_WORDS


def model_text(text: str) -> str:
    """A message as the classifier reads it: `safety.normalise`d, Cyrillic as reduced Latin."""
    return safety.skeleton(safety.normalise(text))


_SENTENCE = re.compile(r"(?<=[.!?;\n])\s+")


def chunks(text: str) -> list[str]:
    """The message in pieces of about CHUNK_CHARS, split at sentence ends where there are any."""
    text = text[-MAX_CHARS:]
    pieces: list[str] = []
    current = ""
    for sentence in _SENTENCE.split(text):
        while len(sentence) > CHUNK_CHARS:  # one long run without sentence ends
            pieces.append(sentence[:CHUNK_CHARS])
            sentence = sentence[CHUNK_CHARS:]
        if current and len(current) + len(sentence) > CHUNK_CHARS:
            pieces.append(current)
            current = ""
        current = f"{current} {sentence}" if current else sentence
    if current:
        pieces.append(current)
    return pieces or [""]


def read_training_data(paths: Sequence[Path] = TRAINING_FILES) -> tuple[list[str], list[str], list[str]]:
    """(languages, labels, texts) of the training set: one `lang<TAB>label<TAB>text` a line."""
    langs, labels, texts = [], [], []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            lang, label, text = line.split("\t", 2)
            if label not in NOT_CRISIS + CATEGORIES:
                raise ValueError(f"unknown label {label!r} in {path.name}")
            langs.append(lang)
            labels.append(label)
            texts.append(text)
    return langs, labels, texts


@dataclass
class Fitted:
    """The features and three linear models over them: crisis or not (the decision), the crisis
    category (what the card and the review say), and distress or worse (context for later
    messages of the session)."""

    vectorizer: TfidfVectorizer
    crisis: LogisticRegression
    category: LogisticRegression
    distress: LogisticRegression


def fit(texts: list[str], labels: list[str], *, c: float = 10.0) -> Fitted:
    vectorizer = TfidfVectorizer(
        analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True, preprocessor=model_text, dtype=np.float32
    )
    features = vectorizer.fit_transform(texts)
    is_crisis = np.array([label in CATEGORIES for label in labels])
    # Balanced: crisis rows are few next to everyday text. liblinear: binary and fast (~0.1 s).
    crisis = LogisticRegression(C=c, class_weight="balanced", solver="liblinear").fit(features, is_crisis)
    category = LogisticRegression(C=c, max_iter=2000).fit(
        features[is_crisis], [label for label, hit in zip(labels, is_crisis, strict=True) if hit]
    )
    distressed = np.array([label != "none" for label in labels])
    distress = LogisticRegression(C=c, class_weight="balanced", solver="liblinear").fit(features, distressed)
    return Fitted(vectorizer, crisis, category, distress)


@dataclass(frozen=True)
class Score:
    """The classifier's view of one message: crisis probability, its likeliest crisis category,
    distress (scored for earlier messages of the session only) and the n-grams that weighed most."""

    crisis: float
    category: str
    distress: float
    features: list[str] = field(default_factory=list)


class Detector:
    def __init__(self, fitted: Fitted) -> None:
        self.fitted = fitted
        self._names = fitted.vectorizer.get_feature_names_out()

    def score(self, text: str, *, explain: bool = True) -> Score:
        model = self.fitted
        features = model.vectorizer.transform(chunks(text))
        crisis = model.crisis.predict_proba(features)[:, 1]
        worst = int(np.argmax(crisis))
        sparse = features[worst]
        category = str(model.category.predict(sparse)[0])
        distress = float(model.distress.predict_proba(features)[:, 1].max()) if not explain else 0.0
        top: list[str] = []
        if explain:
            # The n-grams that pushed hardest towards crisis in the most worrying piece.
            weights = sparse.data * model.crisis.coef_[0, sparse.indices]
            order = np.argsort(weights)[::-1][:5]
            top = [str(self._names[sparse.indices[i]]) for i in order if weights[i] > 0]
        return Score(crisis=float(crisis[worst]), category=category, distress=distress, features=top)


def _cache_path(digest: str) -> Path:
    root = os.environ.get("COACHING_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "coaching-chat"
    )
    return Path(root) / "crisis-model" / f"{digest}.joblib"


def training_digest(paths: Sequence[Path] = TRAINING_FILES) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update(f"{MODEL_VERSION}/{sklearn.__version__}".encode())
    return digest.hexdigest()[:20]


def load_or_train(paths: Sequence[Path] = TRAINING_FILES) -> Detector:
    cache = _cache_path(training_digest(paths))
    try:
        fitted = joblib.load(cache)
        if isinstance(fitted, Fitted):
            return Detector(fitted)
    except FileNotFoundError:
        pass
    except Exception:
        logger.warning("crisis model cache %s unreadable; training again", cache, exc_info=True)
    _, labels, texts = read_training_data(paths)
    fitted = fit(texts, labels)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed: a second process never loads a half-written file.
        with tempfile.NamedTemporaryFile(dir=cache.parent, suffix=".tmp", delete=False) as handle:
            joblib.dump(fitted, handle)
        os.replace(handle.name, cache)
    except OSError:
        logger.warning("could not cache the crisis model at %s", cache, exc_info=True)
    return Detector(fitted)


_lock = threading.Lock()


@functools.cache
def detector() -> Detector:
    with _lock:  # two threads of one process train once
        return load_or_train()


def warm() -> None:
    """Load (or fit) the model now, so the first accepted message does not pay for it."""
    detector().score("warm up")


@dataclass(frozen=True)
class ClassifierHit:
    score: float
    category: str
    features: list[str]
    context: float  # distress earlier in the session, 0 when it was not needed

    def detail(self) -> dict[str, Any]:
        return {
            "score": round(self.score, 3),
            "category": self.category,
            "features": self.features,
            "context": round(self.context, 3),
        }


def classify(text: str, history: list[str] | None = None) -> ClassifierHit | None:
    """A crisis hit for `text`, read with the session's last few earlier coachee messages."""
    if too_short(text):
        return None
    model = detector()
    current = model.score(text)
    if current.crisis >= THRESHOLD:
        return ClassifierHit(current.crisis, current.category, current.features, 0.0)
    if current.crisis >= THRESHOLD_AFTER_DISTRESS and current.category in CONTEXT_CATEGORIES and history:
        context = max(model.score(earlier, explain=False).distress for earlier in history)
        if context >= DISTRESS_IN_CONTEXT:
            return ClassifierHit(current.crisis, current.category, current.features, context)
    return None
