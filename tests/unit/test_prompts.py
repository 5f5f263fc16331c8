"""Prompt files, their placeholders, and the seeded prompt versions."""

from __future__ import annotations

import hashlib

import pytest
from django.db import IntegrityError, transaction

from agents.models import Agent, PromptStatus, PromptVersion
from agents.prompts import (
    DEFAULTS_DIR,
    PLACEHOLDERS,
    default_prompt,
    placeholders_in,
    render_prompt,
    unknown_placeholders,
)

AGENTS = sorted(PLACEHOLDERS)


def test_every_agent_has_a_default_prompt_file_and_nothing_else_is_there() -> None:
    assert sorted(p.stem for p in DEFAULTS_DIR.glob("*.md")) == AGENTS
    assert sorted(Agent.values) == AGENTS


@pytest.mark.parametrize("agent", AGENTS)
def test_default_prompt_uses_only_allowed_placeholders(agent: str) -> None:
    body, sha = default_prompt(agent)
    assert body.strip()
    assert sha == hashlib.sha256(body.encode()).hexdigest()
    assert unknown_placeholders(agent, body) == set()
    assert placeholders_in(body) <= PLACEHOLDERS[agent]


@pytest.mark.parametrize("agent", AGENTS)
def test_default_prompt_renders_with_its_placeholders_filled(agent: str) -> None:
    body, _ = default_prompt(agent)
    values = {name: f"<<{name} value>>" for name in PLACEHOLDERS[agent]}
    rendered = render_prompt(body, values)
    for name in placeholders_in(body):
        assert f"<<{name} value>>" in rendered
    assert "${" not in rendered


def test_the_defaults_use_the_placeholders_the_pipeline_fills() -> None:
    # What the pipeline passes (pipeline/runner.py, critic_gate.py); a default that dropped one
    # would silently lose that input.
    assert placeholders_in(default_prompt("plasticity")[0]) == {"moves", "persona_profile"}
    assert placeholders_in(default_prompt("stability")[0]) == {"moves"}
    assert placeholders_in(default_prompt("synth")[0]) == {"brief", "coach_reply", "specialists"}
    assert placeholders_in(default_prompt("critic")[0]) == {"blocked_moves", "reply"}
    assert placeholders_in(default_prompt("shadow")[0]) == set()


def test_unknown_placeholders_are_found() -> None:
    body = "Moves: ${moves}. Profile: $persona_profile. Secret: ${api_key} and $brief."
    assert unknown_placeholders("plasticity", body) == {"api_key", "brief"}
    assert unknown_placeholders("shadow", "Look at ${moves}") == {"moves"}
    assert unknown_placeholders("critic", "${reply} ${blocked_moves}") == set()


def test_an_escaped_dollar_is_not_a_placeholder() -> None:
    assert placeholders_in("It costs $$5 and $$${moves}") == {"moves"}
    assert render_prompt("It costs $$5 for ${moves}", {"moves": "x"}) == "It costs $5 for x"


@pytest.mark.parametrize("body", ["It costs $5.", "A lone $ sign", "Ends with $", "${ not closed"])
def test_a_lone_dollar_is_refused(body: str) -> None:
    with pytest.raises(ValueError, match=r"write \$\$ for a dollar sign"):
        placeholders_in(body)
    with pytest.raises(ValueError, match=r"write \$\$"):
        unknown_placeholders("coach", body)


def test_render_prompt_fills_values_once() -> None:
    rendered = render_prompt(
        "Reply: ${reply}\nBlocked: $blocked_moves", {"reply": "Use ${brief} $$", "blocked_moves": "none"}
    )
    # Values are inserted as they are, never expanded again.
    assert rendered == "Reply: Use ${brief} $$\nBlocked: none"


def test_render_prompt_refuses_a_missing_value() -> None:
    with pytest.raises(KeyError, match="moves"):
        render_prompt("Moves: ${moves}", {})


# --- seeded versions and the one-active constraint -----------------------------------------


@pytest.mark.usefixtures("seeded")
def test_the_seed_made_one_active_default_prompt_per_agent() -> None:
    active = PromptVersion.objects.filter(status=PromptStatus.ACTIVE)
    assert sorted(active.values_list("agent", flat=True)) == AGENTS
    for prompt in active:
        body, sha = default_prompt(prompt.agent)
        assert prompt.version == 1
        assert prompt.body == body
        assert prompt.source_sha256 == sha
        assert prompt.source == f"agents/prompts/defaults/{prompt.agent}.md"
    assert PromptVersion.objects.count() == len(AGENTS)


@pytest.mark.usefixtures("seeded")
def test_the_database_refuses_a_second_active_prompt_for_an_agent() -> None:
    with pytest.raises(IntegrityError, match="one_active_prompt_per_agent"), transaction.atomic():
        PromptVersion.objects.create(agent=Agent.COACH, version=2, body="Another", status=PromptStatus.ACTIVE)
    assert PromptVersion.objects.filter(agent=Agent.COACH, status=PromptStatus.ACTIVE).count() == 1


@pytest.mark.usefixtures("seeded")
def test_drafts_and_other_agents_active_prompts_are_allowed() -> None:
    PromptVersion.objects.create(agent=Agent.COACH, version=2, body="Draft", status=PromptStatus.DRAFT)
    PromptVersion.objects.create(agent=Agent.COACH, version=3, body="Old", status=PromptStatus.RETIRED)
    assert PromptVersion.objects.filter(agent=Agent.COACH).count() == 3
    # Switching the active version works when the old one is retired first.
    with transaction.atomic():
        PromptVersion.objects.filter(agent=Agent.COACH, status=PromptStatus.ACTIVE).update(status=PromptStatus.RETIRED)
        PromptVersion.objects.filter(agent=Agent.COACH, version=2).update(status=PromptStatus.ACTIVE)
    assert PromptVersion.objects.get(agent=Agent.COACH, status=PromptStatus.ACTIVE).version == 2


@pytest.mark.usefixtures("seeded")
def test_the_database_refuses_a_repeated_version_number() -> None:
    with pytest.raises(IntegrityError, match="prompt_version_unique"), transaction.atomic():
        PromptVersion.objects.create(agent=Agent.SHADOW, version=1, body="Again", status=PromptStatus.DRAFT)
