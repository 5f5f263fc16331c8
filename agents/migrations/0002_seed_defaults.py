"""Seed the embedded endpoint, agent configs, default prompts and the move catalog.

Idempotent and never overwrites: an agent that already has any prompt version keeps it
(operators' edits win), and existing endpoints, configs and moves are left alone.
Later changes to the prompt files arrive through `manage.py prompts_sync` as new drafts.
"""

from django.db import migrations

EMBEDDED_ENDPOINT = {
    "name": "embedded",
    "kind": "llamacpp",
    "base_url": "http://127.0.0.1:8081/v1",
    "model_id": "smollm2-135m-instruct",
    "max_concurrency": 1,
    "read_timeout_s": 300.0,
}

# (agent, temperature, max_tokens, context_budget)
AGENT_DEFAULTS = [
    ("coach", 0.7, 200, 3000),
    ("shadow", 0.2, 450, 3000),
    ("persona", 0.2, 600, 3000),
    ("plasticity", 0.3, 350, 3000),
    ("stability", 0.1, 350, 3000),
    ("synth", 0.5, 700, 3000),
    ("critic", 0.0, 200, 3000),
]

# (key, name, description, pushes)
MOVES = [
    ("reflect_feelings", "Reflect feelings", "Name the feeling you hear, without judging it.", False),
    ("open_question", "Open question", "Ask one open question that invites them to think further.", False),
    ("affirm_strength", "Affirm a strength", "Point to a real strength they showed.", False),
    ("normalize_setback", "Normalise the setback", "Say that setbacks are part of change.", False),
    ("tiny_next_step", "Tiny next step", "Agree on one very small, concrete next action.", False),
    ("if_then_plan", "If-then plan", "Help them form an implementation intention: if X, then I will Y.", False),
    ("values_clarification", "Clarify values", "Explore why the goal matters to them.", False),
    ("reframe_thought", "Reframe", "Offer a kinder, more accurate way to see the situation.", False),
    ("grounding_pause", "Grounding pause", "Invite a slow breath and a pause before deciding anything.", False),
    ("suggest_professional_support", "Suggest professional support", "Encourage talking to a qualified professional.", False),
    ("accountability_checkin", "Accountability check-in", "Ask them to report back on a commitment by a date.", True),
    ("direct_challenge", "Direct challenge", "Name the gap between their words and actions bluntly.", True),
    ("stretch_goal", "Stretch goal", "Propose a more ambitious target than they set.", True),
    ("deadline_commitment", "Deadline commitment", "Ask for a firm deadline for the next step.", True),
]


def seed(apps, schema_editor):
    import hashlib
    from pathlib import Path

    ModelEndpoint = apps.get_model("agents", "ModelEndpoint")
    AgentConfig = apps.get_model("agents", "AgentConfig")
    PromptVersion = apps.get_model("agents", "PromptVersion")
    CoachingMove = apps.get_model("agents", "CoachingMove")

    endpoint, _ = ModelEndpoint.objects.get_or_create(name=EMBEDDED_ENDPOINT["name"], defaults=EMBEDDED_ENDPOINT)
    defaults_dir = Path(__file__).resolve().parent.parent / "prompts" / "defaults"
    for agent, temperature, max_tokens, budget in AGENT_DEFAULTS:
        AgentConfig.objects.get_or_create(
            agent=agent,
            defaults={"endpoint": endpoint, "temperature": temperature, "max_tokens": max_tokens, "context_budget": budget},
        )
        if not PromptVersion.objects.filter(agent=agent).exists():
            body = (defaults_dir / f"{agent}.md").read_text(encoding="utf-8")
            PromptVersion.objects.create(
                agent=agent,
                version=1,
                body=body,
                status="active",
                source=f"agents/prompts/defaults/{agent}.md",
                source_sha256=hashlib.sha256(body.encode()).hexdigest(),
            )
    for key, name, description, pushes in MOVES:
        CoachingMove.objects.get_or_create(key=key, defaults={"name": name, "description": description, "pushes": pushes})


class Migration(migrations.Migration):
    dependencies = [("agents", "0001_initial")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
