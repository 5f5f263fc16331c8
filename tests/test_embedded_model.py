"""One whole turn against the real embedded model: llama.cpp's server with SmolLM2-135M.

Slow (a minute or two on two CPU cores): every agent runs for real, one request at a time.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from agents.llm.embedded import MODEL_ALIAS
from agents.models import AgentRun, Message, RunStatus, Turn, TurnStatus
from agents.schemas import OUTPUT_SCHEMAS
from agents.services import session_start
from tests.conftest import (
    OUTPUT_DIR,
    ROOT,
    ChatClient,
    LiveStack,
    _wait_http,
    free_port,
    login_cookie,
    make_coachee,
    point_agents_at,
    seed_defaults,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(900),
    pytest.mark.usefixtures("close_thread_connections"),
]


@pytest.fixture(scope="module")
def embedded_model() -> Iterator[str]:
    port = free_port()
    OUTPUT_DIR.mkdir(exist_ok=True)
    log = (OUTPUT_DIR / "embedded-llm.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "agents.llm.embedded", "--port", str(port)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_http(f"http://127.0.0.1:{port}/v1/models", 120)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


async def test_a_whole_turn_on_the_embedded_model(
    start_stack: Any, embedded_model: str, settings: Any, transactional_db: None
) -> None:
    settings.COACHING_LLM_ALLOW_REQUESTS = True
    stack: LiveStack = await sync_to_async(start_stack)(deadline_s=900, name="embedded")

    def prepare() -> Any:
        seed_defaults()
        endpoint = point_agents_at(embedded_model, kind="llamacpp", read_timeout_s=300)
        endpoint.model_id = MODEL_ALIAS
        endpoint.max_concurrency = 1  # as `make run` configures it: Coach goes first
        endpoint.save()
        user = make_coachee()
        return session_start(user_id=user.pk), login_cookie("coachee", "pw-for-tests-1")

    session, cookie = await sync_to_async(prepare)()
    async with ChatClient(stack, session, cookie) as client:
        await client.send(
            {
                "type": "user.message",
                "client_id": "real-1",
                "text": "I want to run three times a week, but I keep skipping it when work gets busy.",
            }
        )
        await client.until(lambda e: e["type"] == "turn.done", timeout_s=840)

    turn = await sync_to_async(Turn.objects.get)(session=session)
    runs = await sync_to_async(lambda: list(AgentRun.objects.filter(turn=turn).order_by("started_at")))()
    report = "\n".join(
        f"{r.agent} r{r.round} {r.status} attempts={r.attempts} {r.latency_ms} ms {r.error[:120]} "
        f"{r.validation_errors} raw={r.raw_output[:300]!r}"
        for r in runs
    )
    print(report)  # shown by pytest -rA and on failure: what the real model did
    assert turn.status == TurnStatus.DONE, report

    coach = next(r for r in runs if r.agent == "coach")
    assert coach.status == RunStatus.SUCCEEDED, report
    assert coach.raw_output.strip()
    assert any(e["type"] == "coach.delta" for e in client.events)

    # Every JSON agent answered with output that validated (after at most one repair).
    json_runs = [r for r in runs if r.agent != "coach"]
    assert {r.agent for r in json_runs} >= {"shadow", "persona", "plasticity", "stability", "synth", "critic"}, report
    for run in json_runs:
        assert run.status == RunStatus.SUCCEEDED, report
        OUTPUT_SCHEMAS[run.agent].model_validate(run.parsed_output)
        assert run.prompt_tokens, report
        assert run.completion_tokens, report

    synth = await sync_to_async(Message.objects.get)(session=session, role="synth")
    assert synth.text.strip()
