"""The circuit breaker per endpoint: real Redis, a fake clock, and the simulated server."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from agents.llm import breaker
from agents.llm.client import Completion, EndpointSpec, StreamState, chat_complete, chat_stream
from agents.llm.errors import LLMCircuitOpen, LLMOutputError, LLMPermanentError, LLMTransientError
from agents.llm.simulator.server import SimulatorServer
from agents.roles import structured

pytestmark = pytest.mark.timeout(60)

MESSAGES = [{"role": "user", "content": "I skipped my run."}]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def circuit(clock: FakeClock) -> Iterator[breaker.CircuitBreaker]:
    # A unique name per test: nothing shared with other tests or a running app.
    b = breaker.CircuitBreaker(
        f"test-{uuid.uuid4().hex[:8]}",
        client=breaker._client(breaker.redis_url()),
        threshold=3,
        cooldown_s=30,
        clock=clock,
    )
    yield b
    b.reset()


def test_it_opens_after_threshold_consecutive_failures(circuit: breaker.CircuitBreaker) -> None:
    assert circuit.record_failure() is False
    assert circuit.record_failure() is False
    circuit.before_call()  # still closed after two
    assert circuit.record_failure() is True
    assert circuit.state().state == "open"
    with pytest.raises(LLMCircuitOpen) as raised:
        circuit.before_call()
    assert raised.value.retry_after_s == pytest.approx(30)


def test_a_success_resets_the_count(circuit: breaker.CircuitBreaker) -> None:
    circuit.record_failure()
    circuit.record_failure()
    circuit.record_success()
    circuit.record_failure()
    circuit.record_failure()
    assert circuit.state().state == "closed"


def test_after_the_cooldown_one_probe_goes_through_and_its_success_closes(
    circuit: breaker.CircuitBreaker, clock: FakeClock
) -> None:
    for _ in range(3):
        circuit.record_failure()
    clock.now += 29
    with pytest.raises(LLMCircuitOpen):
        circuit.before_call()
    clock.now += 2
    assert circuit.state().state == "half_open"
    circuit.before_call()  # the probe
    with pytest.raises(LLMCircuitOpen):
        circuit.before_call()  # a second caller while the probe runs
    circuit.record_success()
    assert circuit.state().state == "closed"
    circuit.before_call()


def test_a_failed_probe_opens_it_again_for_a_new_cooldown(circuit: breaker.CircuitBreaker, clock: FakeClock) -> None:
    for _ in range(3):
        circuit.record_failure()
    clock.now += 31
    circuit.before_call()
    assert circuit.record_failure() is True
    state = circuit.state()
    assert state.state == "open"
    assert state.opened_at == clock.now


def test_failures_while_open_do_not_extend_the_cooldown(circuit: breaker.CircuitBreaker, clock: FakeClock) -> None:
    for _ in range(3):
        circuit.record_failure()
    opened_at = circuit.state().opened_at
    clock.now += 10
    assert circuit.record_failure() is False  # a call started before it opened
    assert circuit.state().opened_at == opened_at


def test_state_is_shared_by_every_breaker_of_the_endpoint(circuit: breaker.CircuitBreaker, clock: FakeClock) -> None:
    # Another process: another client object on the same Redis database.
    other = breaker.CircuitBreaker(
        circuit.name, client=breaker.redis.Redis.from_url(breaker.redis_url()), threshold=3, cooldown_s=30, clock=clock
    )
    for _ in range(3):
        other.record_failure()
    with pytest.raises(LLMCircuitOpen):
        circuit.before_call()


def test_with_redis_unreachable_calls_go_ahead(clock: FakeClock) -> None:
    dead = breaker.CircuitBreaker(
        "unreachable", client=breaker.make_client("redis://127.0.0.1:9/0"), threshold=1, cooldown_s=30, clock=clock
    )
    assert dead.record_failure() is False
    dead.before_call()
    assert dead.state().state == "closed"
    dead.record_success()


def test_open_endpoints_lists_only_failing_ones(settings: Any) -> None:
    settings.COACHING_LLM_BREAKER_THRESHOLD = 1
    name = f"ep-{uuid.uuid4().hex[:8]}"
    try:
        breaker.for_endpoint(name).record_failure()
        assert breaker.open_endpoints([name, "healthy-" + name]) == [name]
    finally:
        breaker.reset_all()


# --- Inside the client, against the simulated server ------------------------------------


def spec_for(sim: SimulatorServer) -> EndpointSpec:
    return EndpointSpec(name="breaker-sim", kind="vllm", base_url=sim.base_url, model_id="sim-model", read_timeout_s=5)


def complete(spec: EndpointSpec, timeout_s: float | None = None) -> Completion:
    return chat_complete(
        spec, MESSAGES, max_tokens=20, temperature=0, headers={"X-Coaching-Agent": "b"}, timeout_s=timeout_s
    )


@pytest.fixture
def sim_breaker(sim: SimulatorServer, settings: Any) -> SimulatorServer:
    settings.COACHING_LLM_BREAKER_THRESHOLD = 3
    settings.COACHING_LLM_BREAKER_COOLDOWN_S = 60
    return sim


@pytest.mark.parametrize("fault", ["http_500", "timeout", "drop"])
def test_server_failures_open_it_and_later_calls_fail_fast(sim_breaker: SimulatorServer, fault: str) -> None:
    sim_breaker.configure(agents={"b": {"fault": fault, "delay_s": 5}})
    spec = spec_for(sim_breaker)
    for _ in range(3):
        with pytest.raises(LLMTransientError) as raised:
            complete(spec, timeout_s=0.5)
        assert not isinstance(raised.value, LLMCircuitOpen)
    with pytest.raises(LLMCircuitOpen):
        complete(spec)
    assert len(sim_breaker.calls("b")) == 3  # the fourth call never reached the server


@pytest.mark.parametrize(
    ("fault", "error"), [("http_400", LLMPermanentError), ("http_429", LLMTransientError), ("invalid_json", None)]
)
def test_answers_from_a_healthy_server_do_not_count(
    sim_breaker: SimulatorServer, fault: str, error: type[Exception] | None
) -> None:
    sim_breaker.configure(agents={"b": {"fault": fault}})
    spec = spec_for(sim_breaker)
    for _ in range(4):
        if error is None:
            complete(spec)  # invalid JSON is the pipeline's business, not the endpoint's health
        else:
            with pytest.raises(error):
                complete(spec)
    assert breaker.for_endpoint(spec.name).state().state == "closed"


async def test_the_stream_counts_failures_and_fails_fast_when_open(sim_breaker: SimulatorServer) -> None:
    sim_breaker.configure(agents={"b": {"fault": "http_500"}})
    spec = spec_for(sim_breaker)

    async def stream() -> str:
        pieces = []
        async for piece in chat_stream(
            spec, MESSAGES, StreamState(), max_tokens=20, temperature=0, headers={"X-Coaching-Agent": "b"}
        ):
            pieces.append(piece)
        return "".join(pieces)

    for _ in range(3):
        with pytest.raises(LLMTransientError):
            await stream()
    with pytest.raises(LLMCircuitOpen):
        await stream()
    sim_breaker.configure(agents={"b": {"fault": None}})
    breaker.for_endpoint(spec.name).reset()
    assert await stream()


async def test_a_stream_that_trickles_past_its_budget_is_cut_off(sim_breaker: SimulatorServer) -> None:
    sim_breaker.configure(agents={"b": {"fault": "slow_stream", "slow_tokens_per_s": 5, "output_tokens": 40}})
    spec = spec_for(sim_breaker)
    pieces: list[str] = []

    async def consume() -> None:
        async for piece in chat_stream(
            spec, MESSAGES, StreamState(), max_tokens=60, temperature=0, headers={"X-Coaching-Agent": "b"}, timeout_s=1
        ):
            pieces.append(piece)

    with pytest.raises(LLMTransientError, match="too slowly"):
        await consume()
    assert 0 < len(pieces) < 40


def test_call_with_retries_gives_up_at_once_on_an_open_breaker() -> None:
    calls = []

    def call(_timeout: float) -> Completion:
        calls.append(1)
        raise LLMCircuitOpen("x", retry_after_s=10)

    with pytest.raises(LLMCircuitOpen):
        structured.call_with_retries(call, deadline=time.time() + 30, counter=structured.CallCounter())
    assert len(calls) == 1


def test_output_errors_are_not_health_failures() -> None:
    from agents.llm.client import is_health_failure

    assert not is_health_failure(LLMOutputError("bad json"))
    assert not is_health_failure(LLMPermanentError("400"))
