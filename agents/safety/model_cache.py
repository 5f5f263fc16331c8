"""Where the safety layers' fitted models are kept between processes: outside the repository,
one file per model and training data (the digest of what it was fitted from), so a second run,
a second process or CI's next run loads it instead of fitting again."""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

import joblib

logger = logging.getLogger(__name__)

T = TypeVar("T")


def cache_path(kind: str, digest: str) -> Path:
    root = os.environ.get("COACHING_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "coaching-chat"
    )
    return Path(root) / kind / f"{digest}.joblib"


def announce_fit(kind: str, digest: str, what: str, takes: str) -> None:
    """Say so before a fit that is not cached yet (scripts/lib.sh fits before anything starts)."""
    if not cache_path(kind, digest).exists():
        print(f"fitting the {what} for this training data (first time only: {takes})", flush=True)


def load_or_fit(kind: str, digest: str, expected: type[T], fit: Callable[[], T]) -> T:
    """The model cached for `digest`, else `fit()`'s, cached for the next process."""
    cache = cache_path(kind, digest)
    try:
        fitted = joblib.load(cache)
        if isinstance(fitted, expected):
            return fitted
    except FileNotFoundError:
        pass
    except Exception:
        logger.warning("%s cache %s unreadable; fitting again", kind, cache, exc_info=True)
    fitted = fit()
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed: a second process never loads a half-written file.
        with tempfile.NamedTemporaryFile(dir=cache.parent, suffix=".tmp", delete=False) as handle:
            joblib.dump(fitted, handle)
        os.replace(handle.name, cache)
    except OSError:
        logger.warning("could not cache the %s at %s", kind, cache, exc_info=True)
    return fitted


class PerProcess(Generic[T]):
    """A model loaded (or fitted) once per process. Threads that arrive together wait for the
    first one's load; a cached function with a lock inside would have each of them load it again
    in turn (twelve worker threads: twelve loads of ~1.5 s, one after another)."""

    def __init__(self, load: Callable[[], T]) -> None:
        self._load = load
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        if self._value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._load()
        return self._value
