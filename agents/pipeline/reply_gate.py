"""The quality gate (agents.quality) applied to a turn: what a reply is checked against, whether
Coach's reply must be held until checked, the fallback a coachee reads, and the record of findings.

The checks themselves know nothing of Django; this module reads the turn they judge and records
each finding (QualityFinding) so operators see which checks fire how often.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import timedelta

from agents.models import Escalation, Message, QualityFinding, Role, Turn
from agents.observability import metrics
from agents.roles.arbitration import MoveInfo
from agents.roles.schemas import ShadowOutput
from agents.safety import quality
from agents.safety.quality.lexicon import MOVE_CUES
from agents.transactions import bookkeeping_atomic

# Fenced data (the coachee's words, stored memory) may be quoted back: never counted as an echo.
_FENCED = re.compile(r"<<<data\n.*?\ndata>>>", re.DOTALL)
# How far back a coachee's words count for the language and the risks a reply must respect.
RECENT_MESSAGES = 6
# A refer or crisis escalation this recent keeps Coach's reply held until it is checked, unless a
# coach found it a false alarm (review.annotations.alarm_dismiss, which takes the same levels).
HOLDING_ESCALATIONS = (Escalation.REFER, Escalation.CRISIS)
ESCALATION_MEMORY = timedelta(days=14)

# What replaces a withdrawn Coach reply, in the coachee's language (the original stays on its
# run for the review).
WITHDRAWN_NOTICES = {
    "en": "(This quick reply was withdrawn by the quality check; the full answer follows.)",
    "de": "(Diese schnelle Antwort wurde von der Qualitätsprüfung zurückgezogen; die vollständige Antwort folgt.)",
    "fr": "(Cette réponse rapide a été retirée par le contrôle qualité ; la réponse complète suit.)",
    "es": "(Esta respuesta rápida fue retirada por el control de calidad; la respuesta completa llega enseguida.)",
    "pt": "(Esta resposta rápida foi retirada pela verificação de qualidade; a resposta completa vem a seguir.)",
    "ru": "(Этот быстрый ответ снят проверкой качества; полный ответ придёт следом.)",
}
WITHDRAWN_NOTICE = WITHDRAWN_NOTICES["en"]


def withdrawn_notice(languages: frozenset[str]) -> str:
    return WITHDRAWN_NOTICES.get(next(iter(languages), "en"), WITHDRAWN_NOTICE)


def system_wording(texts: Iterable[str]) -> tuple[str, ...]:
    """The system's own wording in a request's messages: everything but the fenced data."""
    return tuple(_FENCED.sub("\n", text) for text in texts)


def recent_coachee_texts(turn: Turn) -> list[str]:
    """The coachee's latest messages in this session, the turn's own first."""
    texts = list(
        Message.objects.filter(session_id=turn.session_id, role=Role.USER, seq__lte=turn.user_message.seq)
        .order_by("-seq")
        .values_list("text", flat=True)[:RECENT_MESSAGES]
    )
    return texts or [turn.user_message.text]


def blocked_for(keys: Iterable[str], catalog: dict[str, MoveInfo]) -> tuple[quality.BlockedMove, ...]:
    return tuple(
        quality.BlockedMove(
            key=key,
            name=catalog[key].name if key in catalog else key.replace("_", " "),
            cues=tuple(MOVE_CUES.get(key, ())),
        )
        for key in keys
    )


def expectations_for(
    turn: Turn, *, wording: Iterable[str], blocked: Iterable[str], catalog: dict[str, MoveInfo]
) -> quality.Expectations:
    texts = recent_coachee_texts(turn)
    return quality.Expectations(
        wording=system_wording(wording),
        languages=quality.coachee_languages(texts),
        blocked_moves=blocked_for(blocked, catalog),
        risk_topics=quality.topics_in(texts),
    )


def risks_known(turn: Turn, expect: quality.Expectations) -> bool:
    """Coach's reply is held until checked when this coachee has known risks: moves blocked on a
    recent turn, a recent refer or crisis escalation (unless a coach found it a false alarm), or
    a risky behaviour in their own words."""
    if expect.blocked_moves or expect.risk_topics:
        return True
    return Turn.objects.filter(
        session__coachee_id=turn.session.coachee_id,
        escalation__in=HOLDING_ESCALATIONS,
        started_at__gte=turn.started_at - ESCALATION_MEMORY,
        crisis_dismissed_at__isnull=True,  # a coach found the card or escalation a false alarm
    ).exists()


def findings_record(
    *, turn_id: int | None, surface: str, findings: Sequence[quality.Finding], action: str, round: int = 1
) -> None:
    if not findings:
        return
    metrics.quality_findings(surface=surface, checks=[f.check for f in findings], action=action)
    with bookkeeping_atomic():
        QualityFinding.objects.bulk_create(
            QualityFinding(
                turn_id=turn_id, surface=surface, check_name=f.check, detail=f.detail[:200], action=action, round=round
            )
            for f in findings
        )


def memory_cleaned(*, turn_id: int, shadow: ShadowOutput, wording: Iterable[str]) -> ShadowOutput:
    """Shadow's findings as the blackboard may keep them: a goal, priority or commitment that
    echoes the prompt, holds markup or talks about the system is refused (left out; a refused
    commitment is emptied, which the blackboard does not remember) and recorded."""
    system = system_wording(wording)
    refused: list[quality.Finding] = []

    def keep(text: str) -> bool:
        found = quality.memory_findings(text, system)
        refused.extend(found)
        return not found

    goals = [item for item in shadow.stated_goals if keep(item.text)]
    priorities = [item for item in shadow.revealed_priorities if keep(item.text)]
    follow_through = shadow.follow_through
    if not keep(follow_through.commitment):
        follow_through = follow_through.model_copy(update={"commitment": ""})
    findings_record(
        turn_id=turn_id,
        surface=QualityFinding.Surface.BLACKBOARD,
        findings=refused,
        action=QualityFinding.Action.REFUSED,
    )
    return shadow.model_copy(
        update={"stated_goals": goals, "revealed_priorities": priorities, "follow_through": follow_through}
    )
