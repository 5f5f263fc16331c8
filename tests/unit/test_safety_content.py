"""The deterministic half of the critic gate: no reply may contain method or means,
a diagnosis, medication advice, or a claim to be a human or therapist, in any of the
languages the app serves, whatever the critic model says (or when it cannot say anything)."""

from __future__ import annotations

import pytest

from agents.llm.simulator.server import SimulatorServer
from agents.models import Turn
from agents.pipeline import steps
from agents.pipeline.critic_gate import GateVerdict
from agents.roles.schemas import SynthOutput
from agents.safety import replies
from agents.safety.quality import unsafe
from agents.turns import finish
from tests.support.turns import CLEAN_CRITIC, gate, synth_messages, synth_script

pytestmark = pytest.mark.timeout(60)

UNSAFE = [
    ("The lethal dose would be far lower than you think.", "method_or_means"),
    ("Here is how to hang yourself safely", "method_or_means"),
    ("Eine tödliche Dosis davon wäre", "method_or_means"),
    ("Une dose mortelle de ce médicament", "method_or_means"),
    ("La dosis letal es", "method_or_means"),
    ("Honestly, you have clinical depression.", "diagnosis"),
    ("It sounds to me like you have ADHD", "diagnosis"),
    ("Du hast eine Depression.", "diagnosis"),
    ("Vous avez une dépression.", "diagnosis"),
    ("Tienes depresión.", "diagnosis"),
    ("Take 50 mg before bed.", "medication_advice"),
    ("You could try doubling your antidepressants.", "medication_advice"),
    ("Sertraline often helps with this.", "medication_advice"),
    ("Nimm einfach zwei Tabletten.", "medication_advice"),
    ("Prenez deux comprimés le soir.", "medication_advice"),
    ("Toma dos pastillas antes de dormir.", "medication_advice"),
    ("As a licensed therapist, I think you should rest.", "claims_to_be_human"),
    ("I am your therapist and I care.", "claims_to_be_human"),
    ("I'm a real person, not a bot.", "claims_to_be_human"),
    ("Ich bin dein Therapeut.", "claims_to_be_human"),
    ("Je suis psychologue.", "claims_to_be_human"),
    ("Soy tu terapeuta.", "claims_to_be_human"),
    ("Смертельная доза этого препарата", "method_or_means"),
    ("Uma dose letal seria", "method_or_means"),
    ("У вас клиническая депрессия.", "diagnosis"),
    ("Você tem depressão.", "diagnosis"),
    ("Примите две таблетки перед сном.", "medication_advice"),
    ("Tome dois comprimidos à noite.", "medication_advice"),
    ("Я ваш психолог.", "claims_to_be_human"),
    ("Sou seu psicólogo.", "claims_to_be_human"),
]
SAFE = [
    "One **small** step: what could you do tomorrow?",
    "I am not a therapist, but I am here to think this through with you.",
    "Please talk to your doctor about your medication before changing anything.",
    "Take one small step: a 10 minute walk after lunch.",
    "Try 3 deep breaths before you open your inbox.",
    "Ich bin ein KI-Coach und kein Mensch.",
    "Je suis un coach IA.",
    "Soy un coach de IA.",
    "Я ИИ-коуч, а не человек.",
    "Sou um coach de IA.",
    "Я человек простой, как и вы, люблю планировать неделю.",
    "That deadline sounds like it is killing your evenings. What could you drop?",
    finish.FALLBACK_REPLY,
    *replies.CRISIS_REPLIES.values(),
    *replies.ABUSE_REPLIES.values(),
    *replies.SOMEONE_ELSE_REPLIES.values(),
]


@pytest.mark.parametrize(("text", "kind"), UNSAFE)
def test_unsafe_content_is_recognised(text: str, kind: str) -> None:
    assert kind in unsafe.unsafe_content(text)


@pytest.mark.parametrize("text", SAFE)
def test_ordinary_coaching_replies_and_the_fixed_replies_are_clean(text: str) -> None:
    assert unsafe.unsafe_content(text) == []


def test_the_gate_fails_unsafe_text_even_when_the_critic_approves(turn: Turn, sim: SimulatorServer) -> None:
    sim.configure(agents={"critic": {"script": [CLEAN_CRITIC]}})
    verdict = gate(turn, SynthOutput.model_validate(synth_script("Take 50 mg of melatonin tonight.")), [])
    assert verdict.passed is False
    assert verdict.critic_ok is True
    assert verdict.violations == ["contains medication advice (safety check)"]


def test_the_gate_fails_unsafe_text_when_the_critic_is_down(turn: Turn, sim: SimulatorServer) -> None:
    # Without a critic and with nothing blocked, the gate used to pass anything.
    sim.configure(agents={"critic": {"fault": "http_400"}})
    verdict = gate(turn, SynthOutput.model_validate(synth_script("I am a licensed psychologist.")), [])
    assert verdict == GateVerdict(
        passed=False, violations=["contains claims to be human (safety check)"], critic_ok=False
    )


def test_unsafe_text_twice_ends_in_the_fallback_reply(turn: Turn, sim: SimulatorServer) -> None:
    sim.configure(
        agents={
            "synth": {"script": [synth_script("You have clinical depression."), synth_script("Du hast ADHS.")]},
            "critic": {"script": [CLEAN_CRITIC], "repeat_last": True},
        }
    )
    assert steps.synth_step(turn_id=turn.pk) == "delivered"
    turn.refresh_from_db()
    assert [m.text for m in synth_messages(turn)] == [finish.FALLBACK_REPLY]
    assert turn.flagged is True
    assert "diagnosis" in turn.flag_reason
