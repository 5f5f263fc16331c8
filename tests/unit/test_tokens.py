"""Token counts: the serving model's tokenizer per server kind, cached, with a high estimate as fallback."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from django.core.cache import cache

from agents.llm.client import EndpointSpec
from agents.llm.simulator.server import SimulatorServer
from agents.llm.simulator.tokens import tokenize
from agents.memory import tokens

PROSE = "I skipped my run again this morning, because work started early and I felt tired. " * 5
DATA = json.dumps({"stated_goals": [{"text": "Run 3x/week", "evidence": [101, 102]}], "pct": 35}) * 3


def spec(base_url: str, kind: str) -> EndpointSpec:
    return EndpointSpec(name=f"t-{kind}", kind=kind, base_url=base_url, model_id="sim-model")


def patch_post(monkeypatch: pytest.MonkeyPatch, post: Any) -> None:
    """Stand in for the tokenize requests (tokens.py posts through one keep-alive httpx.Client)."""
    monkeypatch.setattr(httpx.Client, "post", lambda self, url, **kw: post(url, **kw))


@pytest.fixture(autouse=True)
def _fresh_caches() -> None:
    tokens.clear_local_cache()
    cache.clear()


@pytest.mark.parametrize("kind", ["vllm", "llamacpp"])
def test_each_server_kind_is_counted_by_its_own_tokenize_route(sim: SimulatorServer, kind: str) -> None:
    assert tokens.count_many(spec(sim.base_url, kind), [PROSE, DATA]) == [len(tokenize(PROSE)), len(tokenize(DATA))]


def test_counts_are_cached_so_the_server_is_asked_once(sim: SimulatorServer, monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = spec(sim.base_url, "vllm")
    first = tokens.count_many(endpoint, [PROSE])
    posts: list[str] = []
    patch_post(monkeypatch, lambda url, **kw: posts.append(url))
    assert tokens.count_many(endpoint, [PROSE]) == first  # in-process LRU
    tokens.clear_local_cache()
    assert tokens.count_many(endpoint, [PROSE]) == first  # the shared Django cache
    assert posts == []


def test_without_a_tokenize_route_the_estimate_is_used_and_is_on_the_high_side(sim: SimulatorServer) -> None:
    # A generic OpenAI-compatible server has no route; the estimate must not undercount prose.
    # (The simulator's tokenizer makes every punctuation mark a token, denser than any real
    # BPE on JSON, so only prose is compared.)
    for text in (PROSE, DATA):
        assert tokens.count_many(spec(sim.base_url, "openai"), [text]) == [tokens.estimate_tokens(text)]
    assert tokens.estimate_tokens(PROSE) >= len(tokenize(PROSE))


def test_a_server_that_is_down_falls_back_to_the_estimate_and_is_not_asked_again(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.COACHING_LLM_ALLOW_REQUESTS = True
    posts: list[str] = []

    def refuse(url: str, **kw: Any) -> Any:
        posts.append(url)
        raise httpx.ConnectError("refused")

    patch_post(monkeypatch, refuse)
    down = spec("http://127.0.0.1:9/v1", "vllm")
    assert tokens.count_many(down, [PROSE]) == [tokens.estimate_tokens(PROSE)]
    assert tokens.count_many(down, [DATA]) == [tokens.estimate_tokens(DATA)]
    assert posts == ["http://127.0.0.1:9/tokenize"]  # marked down after the first failure


def test_unit_tests_never_reach_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    patch_post(monkeypatch, lambda *a, **kw: pytest.fail("a model server was called"))
    assert tokens.count_many(spec("http://127.0.0.1:9/v1", "vllm"), [PROSE]) == [tokens.estimate_tokens(PROSE)]


def test_llama_cpp_servers_own_route_is_remembered(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # llama.cpp's server has no llama-cpp-python route: probed once, then asked directly.
    settings.COACHING_LLM_ALLOW_REQUESTS = True
    posts: list[str] = []

    def server(url: str, **kw: Any) -> httpx.Response:
        posts.append(url.rsplit("/", 2)[-2] + "/" + url.rsplit("/", 1)[-1])
        if url.endswith("/tokenize"):
            return httpx.Response(200, json={"tokens": [1, 2, 3]})
        return httpx.Response(404, json={})

    patch_post(monkeypatch, server)
    endpoint = spec("http://llama:8080/v1", "llamacpp")
    assert tokens.count_many(endpoint, ["one", "two"]) == [3, 3]
    assert posts == ["tokenize/count", "llama:8080/tokenize", "llama:8080/tokenize"]
