"""Whole conversations for the coaches' review pages: sessions, turns, runs, conflicts."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import Group
from django.utils import timezone

from agents.memory import blackboard
from agents.models import (
    AgentRun,
    Annotation,
    BlackboardVersion,
    CoachAssignment,
    CoachingMove,
    CoachingSession,
    Conflict,
    Message,
    Role,
    RunStatus,
    Turn,
    TurnStatus,
)
from agents.roles.arbitration import MoveInfo, arbitrate
from agents.roles.schemas import (
    CriticOutput,
    PersonaOutput,
    PlasticityOutput,
    ShadowOutput,
    StabilityOutput,
    SynthOutput,
)
from tests.support.people import make_coachee


@dataclass
class Conversation:
    coachee: Any
    marker: str
    sessions: list[CoachingSession] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    runs: list[AgentRun] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    versions: list[BlackboardVersion] = field(default_factory=list)
    annotations: list[Annotation] = field(default_factory=list)


def build_conversation(
    username: str, marker: str, *, coach: Any = None, sessions: int = 1, start: datetime | None = None
) -> Conversation:
    """One coachee with `sessions` sessions of three turns each: an escalated turn with three
    conflicts and a second critic round, a degraded and flagged turn (Persona failed) and a
    calm turn that needs no review. Every text carries `marker`."""
    coachee = make_coachee(username)
    coachee.groups.add(Group.objects.get(name="coachees"))
    if coach is not None:
        CoachAssignment.objects.create(coach=coach, coachee=coachee)
    convo = Conversation(coachee=coachee, marker=marker)
    catalog = _catalog()
    start = start or timezone.now() - timedelta(days=3)
    board: dict[str, Any] = blackboard.empty()
    for s in range(sessions):
        session_at = start + timedelta(days=s)
        session = CoachingSession.objects.create(coachee=coachee)
        _set_times(session, created_at=session_at)
        convo.sessions.append(session)
        b = _Builder(convo, session)
        for kind in ("escalated", "degraded", "calm"):
            at = session_at + timedelta(minutes=len(convo.turns) * 5)
            user = b.message(Role.USER, f"I keep planning to run and never do {marker} ({kind})", at)
            turn = Turn.objects.create(
                session=session, user_message=user, deadline_at=at + timedelta(minutes=3), status=TurnStatus.DONE
            )
            _set_times(turn, started_at=at)
            convo.turns.append(turn)
            shift = s * 10
            shadow = _shadow(marker, user.pk, 40 + shift, "avoidance" if kind != "calm" else "steady_progress")
            persona = _persona(user.pk, shift) if kind != "degraded" else None
            plasticity = _plasticity(marker, "challenge" if kind == "escalated" else "support")
            stability = _stability(marker, risky=kind == "escalated")
            result = arbitrate(
                shadow=shadow, persona=persona, plasticity=plasticity, stability=stability, catalog=catalog
            )
            b.run(turn, "coach", None, 0, 2500, tokens=(300, 60))
            b.run(turn, "shadow", shadow, 300, 2000)
            if persona is not None:
                b.run(turn, "persona", persona, 2400, 3000)
            else:
                b.run(turn, "persona", None, 2400, 3100, error=f"timeout: no answer within 3.1 s {marker}")
            b.run(turn, "plasticity", plasticity, 2400, 2000)
            b.run(turn, "stability", stability, 2400, 4000, tokens=(900, 150))
            synth = _synth(marker, list(result.allowed_moves)[:1])
            b.run(turn, "synth", synth, 6500, 3000, tokens=(1200, 220))
            critic_result: dict[str, Any]
            if kind == "escalated":
                rejected = CriticOutput.model_validate(
                    {"violated_moves": [], "unsafe_content": ["diagnosis"], "explanation": f"Diagnoses {marker}"}
                )
                b.run(turn, "critic", rejected, 9600, 800, tokens=(700, 40))
                b.run(turn, "synth", synth, 10500, 1500, round=2, tokens=(1250, 200))
                b.run(turn, "critic", CLEAN, 12100, 500, round=2, tokens=(700, 30))
                critic_result = {
                    "round_1": {"passed": False, "violations": [f"unsafe: diagnosis {marker}"], "critic_ok": True},
                    "round_2": {"passed": True, "violations": [], "critic_ok": True},
                }
                finished = 12_800
            else:
                b.run(turn, "critic", CLEAN, 9600, 600, tokens=(700, 30))
                critic_result = {"round_1": {"passed": True, "violations": [], "critic_ok": True}}
                finished = 10_300
            for record in result.conflicts:
                convo.conflicts.append(Conflict.objects.create(turn=turn, **asdict(record)))
            coach_msg = b.message(Role.COACH, f"Quick thought for you {marker}", at + timedelta(seconds=3))
            synth_msg = b.message(Role.SYNTH, synth.reply, at + timedelta(milliseconds=finished))
            turn.coach_message = coach_msg
            turn.synth_message = synth_msg
            turn.brief = result.brief
            turn.escalation = result.brief["escalation"]
            turn.critic_result = critic_result
            turn.degraded = kind == "degraded"
            turn.flagged = kind == "degraded"
            turn.flag_reason = f"critic unavailable {marker}" if kind == "degraded" else ""
            turn.save()
            _set_times(
                turn,
                coach_done_at=at + timedelta(milliseconds=2500),
                finished_at=at + timedelta(milliseconds=finished),
            )
            board = blackboard.merge_shadow(board, shadow, turn_id=turn.pk, at=at.isoformat())
            version = BlackboardVersion.objects.create(
                coachee=coachee,
                version=len(convo.versions) + 1,
                data=board,
                source_turn=turn,
                source_agent="shadow",
            )
            _set_times(version, created_at=at + timedelta(seconds=3))
            convo.versions.append(version)
        b.session.last_seq = b.seq
        b.session.save(update_fields=["last_seq"])
    if coach is not None:
        convo.annotations.append(
            Annotation.objects.create(turn=convo.turns[0], author=coach, rating=4, note=f"Good catch {marker}")
        )
    return convo


def _catalog() -> dict[str, MoveInfo]:
    return {m.key: MoveInfo(m.key, m.name, m.description, m.pushes) for m in CoachingMove.objects.all()}


def _shadow(marker: str, evidence: int, probability: int, pattern: str) -> ShadowOutput:
    return ShadowOutput.model_validate(
        {
            "stated_goals": [{"text": f"Run three times a week {marker}", "evidence": [evidence]}],
            "revealed_priorities": [{"text": f"Work comes first {marker}", "evidence": [evidence]}],
            "follow_through": {
                "commitment": f"Run on Monday morning {marker}",
                "probability_pct": probability,
                "horizon_days": 2,
                "rationale": f"Skipped the last two plans {marker}",
            },
            "pattern_class": pattern,
            "pattern_confidence_pct": 70,
        }
    )


def _persona(evidence: int, shift: int) -> PersonaOutput:
    def trait(score: int, uncertainty: int) -> dict[str, Any]:
        return {"score": max(0, min(100, score + shift)), "uncertainty": uncertainty, "evidence": [evidence]}

    return PersonaOutput.model_validate(
        {
            "ocean": {
                "openness": trait(62, 10),
                "conscientiousness": trait(35, 15),
                "extraversion": trait(50, 20),
                "agreeableness": trait(70, 8),
                "neuroticism": trait(58, 12),
            },
            "recurring_goals": ["Running"],
            "follow_through": [{"goal": "Running", "percent": 30 + shift}],
            "growth_edges": ["Smaller plans"],
        }
    )


def _plasticity(marker: str, strategy: str) -> PlasticityOutput:
    return PlasticityOutput.model_validate(
        {
            "preferences": {"directness": 2, "warmth": 4, "structure": 3, "challenge": 2, "pacing": 2},
            "strategy": strategy,
            "suggested_moves": ["direct_challenge", "tiny_next_step"] if strategy == "challenge" else ["open_question"],
            "rationale": f"Responds to clear structure {marker}",
        }
    )


def _stability(marker: str, risky: bool) -> StabilityOutput:
    return StabilityOutput.model_validate(
        {
            "risks": [
                {"description": f"Burnout at work {marker}", "severity": 4, "detectability": 3, "reversibility": 2},
                {"description": f"Skipping meals {marker}", "severity": 2, "detectability": 4, "reversibility": 1},
            ]
            if risky
            else [],
            "blocked_moves": ["direct_challenge"] if risky else [],
            "escalation": "refer" if risky else "none",
            "rationale": f"Signs of strain {marker}" if risky else f"Calm {marker}",
        }
    )


def _synth(marker: str, moves: list[str]) -> SynthOutput:
    return SynthOutput.model_validate(
        {
            "reply": f"**Full answer** for you {marker}: pick one small step.",
            "moves_used": moves,
            "signals_used": ["shadow", "stability"],
            "signals_missing": [],
        }
    )


CLEAN = CriticOutput.model_validate({"violated_moves": [], "unsafe_content": [], "explanation": "Nothing wrong."})


def _set_times(obj: Any, **times: datetime | None) -> None:
    type(obj).objects.filter(pk=obj.pk).update(**times)
    for name, value in times.items():
        setattr(obj, name, value)


class _Builder:
    def __init__(self, convo: Conversation, session: CoachingSession) -> None:
        self.convo = convo
        self.session = session
        self.seq = 0

    def message(self, role: str, text: str, at: datetime) -> Message:
        self.seq += 1
        message = Message.objects.create(session=self.session, seq=self.seq, role=role, text=text)
        _set_times(message, created_at=at)
        self.convo.messages.append(message)
        return message

    def run(
        self,
        turn: Turn,
        agent: str,
        output: Any,
        start_ms: int,
        duration_ms: int,
        *,
        tokens: tuple[int, int] = (400, 80),
        round: int = 1,
        error: str = "",
    ) -> AgentRun:
        started = turn.started_at + timedelta(milliseconds=start_ms)
        run = AgentRun.objects.create(
            turn=turn,
            agent=agent,
            round=round,
            status=RunStatus.FAILED if error else RunStatus.SUCCEEDED,
            attempts=2 if error else 1,
            prompt_tokens=tokens[0],
            completion_tokens=tokens[1],
            parsed_output=output.model_dump(mode="json") if output is not None else None,
            raw_output="{}" if output is not None else "",
            validation_errors=["ocean.openness: Field required"] if error else [],
            error=error,
            latency_ms=duration_ms,
        )
        _set_times(run, started_at=started, finished_at=started + timedelta(milliseconds=duration_ms))
        self.convo.runs.append(run)
        return run
