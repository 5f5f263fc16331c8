"""Default prompt files and the placeholders each agent's prompt may use.

Prompts use `${name}` placeholders (string.Template), filled by the context builder.
"""

import hashlib
import string
from pathlib import Path

DEFAULTS_DIR = Path(__file__).resolve().parent / "defaults"

# What each agent can be given; a prompt naming anything else is refused.
PLACEHOLDERS: dict[str, frozenset[str]] = {
    "coach": frozenset({"blocked_moves"}),
    "shadow": frozenset(),
    "persona": frozenset(),
    "plasticity": frozenset({"moves", "persona_profile"}),
    "stability": frozenset({"moves"}),
    "synth": frozenset({"brief", "coach_reply", "specialists"}),
    "critic": frozenset({"blocked_moves", "reply"}),
    "summarizer": frozenset({"strategy"}),
    "summary_check": frozenset({"questions"}),
}


def default_prompt(agent: str) -> tuple[str, str]:
    """The default prompt text of an agent and its sha256."""
    path = DEFAULTS_DIR / f"{agent}.md"
    body = path.read_text(encoding="utf-8")
    return body, hashlib.sha256(body.encode()).hexdigest()


def placeholders_in(body: str) -> set[str]:
    found: set[str] = set()
    for match in string.Template.pattern.finditer(body):
        name = match.group("named") or match.group("braced")
        if name:
            found.add(name)
        elif match.group("invalid") is not None:
            raise ValueError("a '$' that is not a ${placeholder}; write $$ for a dollar sign")
    return found


def unknown_placeholders(agent: str, body: str) -> set[str]:
    return placeholders_in(body) - PLACEHOLDERS[agent]


def render_prompt(body: str, values: dict[str, str]) -> str:
    return string.Template(body).substitute(values)
