"""Token counts with the serving model's own tokenizer, cached, with an estimate as fallback.

Where the server has a tokenize route (checked against the servers' docs and the simulator):
- vLLM:              POST {root}/tokenize              {"model": ..., "prompt": text} -> {"count": N, "tokens": [...]}
- llama-cpp-python:  POST {root}/extras/tokenize/count {"input": text}                -> {"count": N}
- llama.cpp server:  POST {root}/tokenize              {"content": text}              -> {"tokens": [...]}
({root} is the base URL without its trailing /v1.) The embedded default is vLLM's CPU build
(agents/llm/embedded.py), so it counts as production does; an endpoint of kind llamacpp tries
llama-cpp-python's route first and llama.cpp's own second.

Counts are cached per (endpoint, model, sha256 of the text): in process (an LRU) and in the
Django cache (shared by workers), so a turn's prefix is counted once. When the server has no
route, is down or slow, `estimate_tokens` is used: a deliberately high count (see there) so a
context cut by the estimate still fits the real budget.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from threading import Lock
from typing import Any

import httpx
from django.conf import settings
from django.core.cache import cache

from agents.llm.client import EndpointSpec
from agents.llm.control_tokens import neutralised

logger = logging.getLogger(__name__)

# Three characters per token: English BPE text averages about four, but JSON, numbers,
# punctuation and other languages run denser; overcounting only costs some context, while
# undercounting would overflow the budget.
CHARS_PER_TOKEN_ESTIMATE = 3
# Chat templates add role markers around each message; a generous per-message allowance.
MESSAGE_OVERHEAD_TOKENS = 8
# Tokenizing is cheap on the server; a slow answer means it is busy (a single-slot llama.cpp
# server may serialise tokenize behind a generation), so estimate instead. Coach's first token
# waits on this at most once per TOKENIZE_RETRY_AFTER_S: the endpoint is then marked down.
TOKENIZE_TIMEOUT_S = 1.0
# An endpoint whose tokenize route failed is not asked again for this long.
TOKENIZE_RETRY_AFTER_S = 300
CACHE_TTL_S = 7 * 24 * 3600
LRU_SIZE = 4096
# Texts counted at once by one process (a turn has a few new ones; a server answers them in parallel).
COUNT_CONCURRENCY = 4


def estimate_tokens(text: str) -> int:
    """The documented fallback: one token per three characters, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN_ESTIMATE) + 1


@dataclass(frozen=True)
class Counter:
    """Counts tokens for one endpoint; `exact` says whether its tokenizer answered."""

    spec: EndpointSpec | None

    def count(self, text: str) -> int:
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        return count_many(self.spec, texts)

    def messages(self, messages: list[dict[str, str]]) -> int:
        return sum(self.count_many([m["content"] for m in messages])) + MESSAGE_OVERHEAD_TOKENS * len(messages)


class _Lru:
    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[str, int] = OrderedDict()
        self.lock = Lock()

    def get(self, key: str) -> int | None:
        with self.lock:
            value = self.items.get(key)
            if value is not None:
                self.items.move_to_end(key)
            return value

    def put(self, key: str, value: int) -> None:
        with self.lock:
            self.items[key] = value
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)


_lru = _Lru(LRU_SIZE)


def _key(spec: EndpointSpec, text: str) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()
    return f"coaching:tokens:{spec.kind}:{spec.base_url}:{spec.model_id}:{digest}"


def _root(base_url: str) -> str:
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _routes(spec: EndpointSpec, text: str) -> list[tuple[str, dict[str, Any]]]:
    root = _root(spec.base_url)
    if spec.kind == "vllm":
        return [(f"{root}/tokenize", {"model": spec.model_id, "prompt": text, "add_special_tokens": False})]
    if spec.kind == "llamacpp":
        return [(f"{root}/extras/tokenize/count", {"input": text}), (f"{root}/tokenize", {"content": text})]
    return []  # a generic OpenAI-compatible server has no tokenize route


def _down_key(spec: EndpointSpec) -> str:
    return f"coaching:tokens:down:{spec.kind}:{spec.base_url}"


# Which of a kind's routes answered, per server, so a llama.cpp server is not probed with
# llama-cpp-python's route (a 404) before every count.
_working_route: dict[tuple[str, str], str] = {}


_http_lock = Lock()
_http: tuple[int, httpx.Client] | None = None


def _http_client() -> httpx.Client:
    """One keep-alive client per process: httpx.post() builds a client (and its TLS context)
    for every call, ~25 ms each, which put ~130 ms before Coach's first token (benchmark)."""
    global _http
    with _http_lock:
        if _http is None or _http[0] != os.getpid():  # a forked child needs its own sockets
            _http = (os.getpid(), httpx.Client(timeout=TOKENIZE_TIMEOUT_S))
        return _http[1]


# The tokenize requests a caller waits on (count_many fans a turn's new texts out there).
_pools_lock = Lock()
_pools: dict[str, tuple[int, ThreadPoolExecutor]] = {}


def _executor(name: str) -> ThreadPoolExecutor:
    with _pools_lock:
        pool = _pools.get(name)
        if pool is None or pool[0] != os.getpid():  # a forked child needs its own threads
            executor = ThreadPoolExecutor(max_workers=COUNT_CONCURRENCY, thread_name_prefix=name)
            pool = _pools[name] = (os.getpid(), executor)
        return pool[1]


def _server_counts(spec: EndpointSpec, texts: list[str]) -> list[int | None]:
    """The server's counts of several texts, asked together, so a turn's new texts (its head,
    the newest messages) cost one round trip instead of one each, before Coach's first token."""
    if not texts:
        return []
    if not _routes(spec, "") or not settings.COACHING_LLM_ALLOW_REQUESTS or cache.get(_down_key(spec)):
        return [None] * len(texts)
    if len(texts) == 1:
        return [_server_count(spec, text) for text in texts]
    if (spec.kind, spec.base_url) not in _working_route:
        # The first text finds which route this server answers (probed once), the rest go at once.
        return [_server_count(spec, texts[0]), *_server_counts(spec, texts[1:])]
    return list(_executor("tokenize").map(functools.partial(_server_count, spec), texts))


def _server_count(spec: EndpointSpec, text: str) -> int | None:
    routes = _routes(spec, text)
    known = _working_route.get((spec.kind, spec.base_url))
    routes.sort(key=lambda route: route[0] != known)
    for url, body in routes:
        try:
            response = _http_client().post(url, json=body)
            if response.status_code == 404:
                continue  # the other server's route
            data = response.json() if response.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
            break
        count = data.get("count") if isinstance(data, dict) else None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if isinstance(count, int) or isinstance(tokens, list):
            _working_route[(spec.kind, spec.base_url)] = url
            return int(count) if isinstance(count, int) else len(tokens or [])
        break
    logger.info("no tokenize route answered on %s; estimating token counts", spec.name)
    cache.set(_down_key(spec), 1, timeout=TOKENIZE_RETRY_AFTER_S)
    return None


def count_many(spec: EndpointSpec | None, texts: Sequence[str]) -> list[int]:
    """Token counts of several texts, from the caches where possible (one cache round trip)."""
    # As the client sends them: a control token the client breaks apart costs several tokens, not one.
    texts = [neutralised(text) for text in texts]
    if spec is None:
        return [estimate_tokens(t) for t in texts]
    counts: dict[int, int] = {}
    keys = {i: _key(spec, t) for i, t in enumerate(texts)}
    for i, key in keys.items():
        hit = _lru.get(key)
        if hit is not None:
            counts[i] = hit
    missing = [i for i in keys if i not in counts]
    if missing:
        found = cache.get_many([keys[i] for i in missing])
        for i in missing:
            if found.get(keys[i]) is not None:
                counts[i] = int(found[keys[i]])
                _lru.put(keys[i], counts[i])
        unknown = [i for i in missing if i not in counts]
        fresh: dict[str, int] = {}
        for i, value in zip(unknown, _server_counts(spec, [texts[i] for i in unknown]), strict=True):
            if value is None:
                counts[i] = estimate_tokens(texts[i])  # not cached: the server may come back
                continue
            counts[i] = fresh[keys[i]] = value
            _lru.put(keys[i], value)
        if fresh:
            cache.set_many(fresh, timeout=CACHE_TTL_S)
    return [counts[i] for i in range(len(texts))]


@functools.lru_cache(maxsize=1)
def _estimate_only() -> Counter:
    return Counter(None)


def counter_for(spec: EndpointSpec | None) -> Counter:
    return Counter(spec) if spec is not None else _estimate_only()


def clear_local_cache() -> None:
    """For tests: forget the in-process counts and routes (the Django cache is flushed separately)."""
    with _lru.lock:
        _lru.items.clear()
    _working_route.clear()
