"""A coachee as a coach sees them across sessions: OCEAN over sessions, follow-through
predictions beside what came after, the sessions, the blackboard's history and the memory's
summaries; and the list of coachees in scope. The caller checks the coachee is in scope."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Max, Q, QuerySet
from django.utils import timezone

from agents.memory import predictions
from agents.models import (
    Agent,
    AgentRun,
    BlackboardVersion,
    CoachingSession,
    Escalation,
    Message,
    Role,
    RunStatus,
    Turn,
)
from agents.review.charts import OceanTrend, ocean_trends
from agents.review.labels import AGENT_LABELS, excerpt
from agents.review.outputs import parse_output
from agents.roles.schemas import PersonaOutput, ShadowOutput
from agents.selectors import turn_number


@dataclass
class LaterMessage:
    when: datetime
    session_id: int
    text: str


@dataclass
class PredictionView:
    commitment: str
    probability_pct: int
    horizon_days: int
    rationale: str
    made_at: datetime
    due_at: datetime
    session_id: int
    turn_id: int
    window_open: bool
    status: str
    turn_number: int | None = None  # in its session, as the session review numbers it
    session_started: datetime | None = None
    later_messages: list[LaterMessage] = field(default_factory=list)
    later_follow_through: list[tuple[str, int]] = field(default_factory=list)
    next_pattern: str = ""


@dataclass
class BlackboardItem:
    kind: str
    text: str
    hidden: bool
    status: str


@dataclass
class VersionView:
    version: BlackboardVersion
    is_latest: bool
    source: str
    source_turn_id: int | None
    source_session_id: int | None
    revert_of: int | None
    counts: list[str]  # "2 goals", "1 priority"
    changes: list[str]
    more_changes: int
    items: list[BlackboardItem]


@dataclass
class SessionSummary:
    session: CoachingSession
    turns: int
    needs_review: int
    first_words: str


@dataclass
class CoacheeOverview:
    coachee: Any
    sessions: list[SessionSummary]
    trends: list[OceanTrend]
    readings: int
    predictions: list[PredictionView]
    versions: list[VersionView]
    # Memory: each session's summary attempts as checked, and how well Shadow's predictions scored.
    memory_summaries: list[Any] = field(default_factory=list)
    brier: list[Any] = field(default_factory=list)


def memory_summaries(coachee: Any, limit: int = 100) -> list[Any]:
    from agents.models import SessionSummary as StoredSummary

    return list(
        StoredSummary.objects.filter(session__coachee=coachee)
        .select_related("session")
        .order_by("-session__created_at", "scope", "covers_until_seq", "attempt")[:limit]
    )


KIND_LABELS = {
    "stated_goals": "Goal",
    "revealed_priorities": "Priority",
    "predictions": "Prediction",
    "patterns": "Pattern",
}
# Plurals spelled out: Django's |pluralize makes "prioritys".
KIND_PLURALS = {"Goal": "goals", "Priority": "priorities", "Prediction": "predictions", "Pattern": "patterns"}
MAX_CHANGES = 8


def _item_text(kind: str, item: dict[str, Any]) -> str:
    if kind == "predictions":
        return f"{item.get('commitment', '?')} ({item.get('probability_pct', '?')}%, {item.get('horizon_days', '?')} d)"
    if kind == "patterns":
        return f"{str(item.get('pattern_class', '?')).replace('_', ' ')} ({item.get('confidence_pct', '?')}%)"
    return str(item.get("text", "?"))


def blackboard_items(data: Any) -> list[BlackboardItem]:
    items = []
    for kind, label in KIND_LABELS.items():
        for item in (data or {}).get(kind, []) if isinstance(data, dict) else []:
            if isinstance(item, dict):
                items.append(
                    BlackboardItem(label, _item_text(kind, item), bool(item.get("hidden")), str(item.get("status", "")))
                )
    return items


def _by_id(data: Any, kind: str) -> dict[str, dict[str, Any]]:
    entries = data.get(kind, []) if isinstance(data, dict) else []
    return {str(item.get("id") or i): item for i, item in enumerate(entries) if isinstance(item, dict)}


def blackboard_changes(before: Any, after: Any) -> list[str]:
    """What changed from one version to the next, in words."""
    changes = []
    for kind, label in KIND_LABELS.items():
        old, new = _by_id(before, kind), _by_id(after, kind)
        for key, item in new.items():
            if key not in old:
                changes.append(f"+ {label}: {_item_text(kind, item)}")
                continue
            prior = old[key]
            if _item_text(kind, prior) != _item_text(kind, item):
                changes.append(f"~ {label}: {_item_text(kind, prior)} → {_item_text(kind, item)}")
            if bool(prior.get("hidden")) != bool(item.get("hidden")):
                changes.append(f"{'hidden' if item.get('hidden') else 'shown again'}: {_item_text(kind, item)}")
            if prior.get("status") != item.get("status") and item.get("status"):
                changes.append(f"~ {label} now {item.get('status')}: {_item_text(kind, item)}")
        for key, item in old.items():
            if key not in new:
                changes.append(f"- {label}: {_item_text(kind, item)}")
    return changes


def count_label(n: int, label: str) -> str:
    """'1 priority', '3 priorities'."""
    return f"{n} {label.lower() if n == 1 else KIND_PLURALS[label]}"


def blackboard_history(coachee_id: int) -> list[VersionView]:
    """Every version, newest first, with where it came from and what it changed."""
    versions = list(
        BlackboardVersion.objects.filter(coachee_id=coachee_id)
        .select_related("source_turn__session", "edited_by")
        .annotate(source_turn_number=turn_number("source_turn__"))
        .order_by("version")
    )
    views: list[VersionView] = []
    for index, version in enumerate(versions):
        previous = versions[index - 1] if index else None
        revert_of = None
        if version.edited_by_id is not None and version.edited_by_id != coachee_id:
            for older in reversed(versions[:index]):
                if older.data == version.data:
                    revert_of = older.version
                    break
        turn = version.source_turn
        editor = version.edited_by.get_username() if version.edited_by else ""
        if revert_of is not None:
            source = f"Reverted to v{revert_of} by {editor}"
        elif version.edited_by_id == coachee_id:
            source = "Corrected by the coachee on their memory page"
        elif version.edited_by_id is not None:
            source = f"Edited by {editor}"
        elif version.source_agent:
            source = f"{AGENT_LABELS.get(version.source_agent, version.source_agent)}"
            if turn is not None:
                number = getattr(version, "source_turn_number", None)
                source += f", turn {number} of the session of {timezone.localtime(turn.session.created_at):%-d %b %Y}"
            else:
                source += " (turn deleted)"
        else:
            source = "Unknown source"
        changes = blackboard_changes(previous.data if previous else {}, version.data)
        data = version.data if isinstance(version.data, dict) else {}
        views.append(
            VersionView(
                version=version,
                is_latest=index == len(versions) - 1,
                source=source,
                source_turn_id=version.source_turn_id,
                source_session_id=turn.session_id if turn else None,
                revert_of=revert_of,
                counts=[count_label(len(data.get(kind, [])), label) for kind, label in KIND_LABELS.items()],
                changes=changes[:MAX_CHANGES],
                more_changes=max(0, len(changes) - MAX_CHANGES),
                items=blackboard_items(data),
            )
        )
    views.reverse()
    return views


def _persona_readings(runs: Iterable[AgentRun]) -> list[tuple[CoachingSession, PersonaOutput]]:
    """The last valid Persona reading of each session, sessions in order."""
    by_session: dict[int, tuple[CoachingSession, PersonaOutput]] = {}
    for run in runs:
        output = parse_output(run)
        if isinstance(output, PersonaOutput):
            by_session[run.turn.session_id] = (run.turn.session, output)
    return sorted(by_session.values(), key=lambda pair: (pair[0].created_at, pair[0].pk))


def _predictions(
    shadow_runs: Sequence[AgentRun],
    persona_runs: Sequence[AgentRun],
    user_messages: list[Message],
    latest_data: Any,
) -> list[PredictionView]:
    now = timezone.now()
    status_by_turn = {
        p.get("source_turn"): str(p.get("status", ""))
        for p in (latest_data or {}).get("predictions", [])
        if isinstance(p, dict)
    }
    shadows = [(run, out) for run in shadow_runs if isinstance(out := parse_output(run), ShadowOutput)]
    personas = [(run, out) for run in persona_runs if isinstance(out := parse_output(run), PersonaOutput)]
    views = []
    for index, (run, shadow) in enumerate(shadows):
        made_at = run.finished_at or run.started_at
        due_at = made_at + timedelta(days=shadow.follow_through.horizon_days)
        later = [
            LaterMessage(m.created_at, m.session_id, excerpt(m.text, 160))
            for m in user_messages
            if made_at < m.created_at <= due_at and m.pk != run.turn.user_message_id
        ]
        in_window = [out for r, out in personas if made_at < r.started_at <= due_at and r.turn_id != run.turn_id]
        next_shadow = shadows[index + 1][1] if index + 1 < len(shadows) else None
        window_open = now < due_at
        views.append(
            PredictionView(
                commitment=shadow.follow_through.commitment,
                probability_pct=shadow.follow_through.probability_pct,
                horizon_days=shadow.follow_through.horizon_days,
                rationale=shadow.follow_through.rationale,
                made_at=made_at,
                due_at=due_at,
                session_id=run.turn.session_id,
                turn_id=run.turn_id,
                turn_number=getattr(run, "turn_number", None),
                session_started=run.turn.session.created_at,
                window_open=window_open,
                status=status_by_turn.get(run.turn_id, ""),
                later_messages=later[:3],
                later_follow_through=[(f.goal, f.percent) for f in in_window[-1].follow_through] if in_window else [],
                next_pattern=(
                    f"{next_shadow.pattern_class.replace('_', ' ')} ({next_shadow.pattern_confidence_pct}%)"
                    if next_shadow
                    else ""
                ),
            )
        )
    views.reverse()  # newest first
    return views


def coachee_overview(coachee: Any) -> CoacheeOverview:
    """OCEAN over sessions, follow-through predictions beside what came after, the sessions,
    and the blackboard's history. The caller checks the coachee is in scope."""
    runs = list(
        AgentRun.objects.filter(
            turn__session__coachee=coachee,
            agent__in=[Agent.PERSONA, Agent.SHADOW],
            status=RunStatus.SUCCEEDED,
        )
        .select_related("turn__session")
        .annotate(turn_number=turn_number("turn__"))
        .order_by("started_at", "pk")
    )
    persona_runs = [r for r in runs if r.agent == Agent.PERSONA]
    shadow_runs = [r for r in runs if r.agent == Agent.SHADOW]
    readings = _persona_readings(persona_runs)
    user_messages = list(Message.objects.filter(session__coachee=coachee, role=Role.USER).order_by("created_at", "pk"))
    first_words: dict[int, str] = {}
    for m in user_messages:
        first_words.setdefault(m.session_id, excerpt(m.text, 80))
    history = blackboard_history(coachee.pk)
    sessions = (
        CoachingSession.objects.filter(coachee=coachee)
        .annotate(
            turn_count=Count("turns", distinct=True),
            review_count=Count(
                "turns",
                filter=~Q(turns__escalation=Escalation.NONE) | Q(turns__degraded=True) | Q(turns__flagged=True),
                distinct=True,
            ),
        )
        .order_by("-created_at")
    )
    return CoacheeOverview(
        coachee=coachee,
        sessions=[
            SessionSummary(s, getattr(s, "turn_count", 0), getattr(s, "review_count", 0), first_words.get(s.pk, ""))
            for s in sessions
        ],
        trends=ocean_trends(readings) if readings else [],
        readings=len(readings),
        predictions=_predictions(
            shadow_runs, persona_runs, user_messages, history[0].version.data if history else None
        ),
        versions=history,
        memory_summaries=memory_summaries(coachee),
        brier=predictions.brier_scores(coachee_id=coachee.pk),
    )


@dataclass
class CoacheeRow:
    coachee: Any
    sessions: int
    last_session: datetime | None
    in_queue: int


def coachee_rows(coachees: QuerySet[Any], queue: QuerySet[Turn]) -> list[CoacheeRow]:
    """The coachees in scope with their session counts and open review items."""
    in_queue: dict[int, int] = {}
    for coachee_id in queue.values_list("session__coachee_id", flat=True):
        in_queue[coachee_id] = in_queue.get(coachee_id, 0) + 1
    annotated = coachees.annotate(
        session_count=Count("coaching_sessions", distinct=True), last_session=Max("coaching_sessions__created_at")
    ).order_by("username")
    return [
        CoacheeRow(
            user, getattr(user, "session_count", 0), getattr(user, "last_session", None), in_queue.get(user.pk, 0)
        )
        for user in annotated
    ]
