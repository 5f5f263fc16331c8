"""The planner's operator page in a real browser: Debian's Chromium driven by Playwright's sync
API against the live stack (Daphne). An operator (not a superuser) logs in, opens the plan,
sees the topology beside the numbers and asks for more concurrent turns. Screenshots go to
test-output/screenshots/operator-planner-*.png."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from django.apps import apps as django_apps
from playwright.sync_api import BrowserContext, Page, expect

from agents.llm import embedded
from agents.models import AgentConfig, ModelEndpoint
from planner.models import Gpu, ModelCard, Placement
from tests.support.browser import PASSWORD, SCREENSHOTS, off_loop
from tests.support.people import make_operator
from tests.support.stack import LiveStack

pytestmark = [
    pytest.mark.browser,
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(120),
]

SERVES = "static/chat/chat.css"
VIEWPORT = {"width": 1400, "height": 1000}
TIMEOUT_MS = 15_000

PLAN_PATH = "/admin/planner/placement/plan/"
# The agents of one turn: what the plan draws and times (the summarizer runs between sessions).
TURN_AGENTS = ["coach", "shadow", "persona", "plasticity", "stability", "synth", "critic"]


def shot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"operator-planner-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


def planned_embedded_endpoint() -> int:
    """The planner's seeds (a transactional test truncated them) and the operators' grant,
    then the embedded endpoint placed on the measured CPU row. Returns how many agents use it."""
    importlib.import_module("planner.migrations.0002_seed_catalogue").seed(django_apps, None)
    importlib.import_module("planner.migrations.0003_operator_permissions").grant(django_apps, None)
    # As scripts/run.sh configures it: vLLM's CPU build, batching up to its --max-num-seqs.
    ModelEndpoint.objects.filter(name="embedded").update(
        kind="vllm", max_concurrency=embedded.MAX_NUM_SEQS, priority_scheduling=True
    )
    Placement.objects.create(
        endpoint=ModelEndpoint.objects.get(name="embedded"),
        model=ModelCard.objects.get(name="smollm2-135m"),
        gpu=Gpu.objects.get(name="cpu-vllm-here"),
        tensor_parallel=1,
    )
    return AgentConfig.objects.filter(endpoint__name="embedded").count()


def test_an_operator_opens_the_deployment_plan(context: BrowserContext, live_stack: LiveStack, seeded_tx: None) -> None:
    agents = off_loop(planned_embedded_endpoint)
    off_loop(make_operator, "op", PASSWORD)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{live_stack.http_url}/admin/login/?next={PLAN_PATH}?turns=2")
    page.get_by_label("Username").fill("op")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_stack.http_url}{PLAN_PATH}?turns=2")

    expect(page.locator("h1")).to_contain_text("Deployment plan")
    topology = page.locator("svg#topology")
    expect(topology).to_be_visible()
    # agents → endpoint → GPU, drawn: every agent, the embedded endpoint, the CPU row.
    for agent in TURN_AGENTS:
        expect(topology.locator("text", has_text=agent)).to_have_count(1)
    expect(topology.locator("text", has_text="embedded")).to_have_count(1)
    expect(topology.locator("text", has_text="GPU 0")).to_have_count(1)
    # Each agent of a turn to the endpoint, and the endpoint to its GPU.
    expect(topology.locator("line")).to_have_count(len(TURN_AGENTS) + 1)
    assert agents >= len(TURN_AGENTS)  # the memory agents use it too, outside a turn's plan
    instances = page.locator("#plan-instances")
    expect(instances).to_contain_text("vllm serve HuggingFaceTB/SmolLM2-135M-Instruct")
    expect(instances).to_contain_text("measured")
    expect(page.locator("#plan-summary")).to_contain_text("Turns per hour")
    kv_cell = instances.locator("tr").nth(1).locator("td").nth(5)
    kv_for_two = kv_cell.inner_text()
    shot(page, "1-two-turns")

    # More concurrent turns: more sequences in the KV cache line.
    page.locator("#turns").fill("8")
    page.get_by_role("button", name="Plan").click()
    page.wait_for_url(f"{live_stack.http_url}{PLAN_PATH}?turns=8")
    expect(page.locator("#turns")).to_have_value("8")
    kv_for_eight = instances.locator("tr").nth(1).locator("td").nth(5).inner_text()
    assert kv_for_eight != kv_for_two, (kv_for_two, kv_for_eight)
    shot(page, "2-eight-turns")
    assert errors == []
