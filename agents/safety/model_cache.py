"""Where the safety layers' fitted models are kept between processes: outside the repository,
one file per model and training data (the digest of what it was fitted from), so a second run,
a second process or CI's next run loads it instead of fitting again."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import joblib

logger = logging.getLogger(__name__)

T = TypeVar("T")


def cache_path(kind: str, digest: str) -> Path:
    root = os.environ.get("COACHING_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "coaching-chat"
    )
    return Path(root) / kind / f"{digest}.joblib"


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
