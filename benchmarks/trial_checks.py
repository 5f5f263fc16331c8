"""What the engine trial reads back from the database once its turns have ended, and checks
again on its own (import after `django.setup()`).

Every text the coachee saw is run through the project's quality gate a second time, with
wider expectations than the product had at that moment: the system's wording of every agent
prompt (not only the one that wrote the text), and every move blocked for that coachee at that
turn (the previous turn's Stability, which Coach is shown, and this turn's Stability and
brief, which Synth is shown). A finding here is a text that reached the coachee.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from agents.chat import coach
from agents.models import (
    Agent,
    AgentConfig,
    AgentRun,
    MessageStatus,
    PromptStatus,
    PromptVersion,
    QualityFinding,
    RunStatus,
    Turn,
)
from agents.pipeline import reply_gate
from agents.roles import turn_setup
from agents.roles.schemas import OUTPUT_SCHEMAS
from agents.safety import quality, replies
from agents.turns import finish
from benchmarks.metrics import percentile
from benchmarks.trial_turns import TurnRecord

JSON_AGENTS = tuple(OUTPUT_SCHEMAS)
AGENT_ORDER = ("coach", "shadow", "persona", "plasticity", "stability", "synth", "critic")
RAW_END_CHARS = 160


@dataclass
class ShownText:
    """One text the coachee saw, and what the second check found in it."""

    turn_id: int
    conversation: str
    index: int
    surface: str  # "coach" or "synth"
    kind: str  # "reply", "fallback", "crisis reply", "withdrawn notice", "streamed, then withdrawn"
    text: str
    junk: list[str] = field(default_factory=list)  # the gate's findings, blocked moves apart
    blocked: list[str] = field(default_factory=list)  # moves blocked at this turn that the text uses
    counted: bool = True  # False for what the product replaced or withdrew (listed, not counted)


# --- Turns --------------------------------------------------------------------------------------


def attach_turn_ids(records: list[TurnRecord]) -> None:
    """The browser does not see turn ids: take them from the session, in the order sent."""
    by_session: dict[int, list[TurnRecord]] = {}
    for record in records:
        if record.turn_id is None:
            by_session.setdefault(record.session_id, []).append(record)
    for session_id, waiting in by_session.items():
        turns = list(Turn.objects.filter(session_id=session_id).select_related("user_message").order_by("started_at"))
        for record, turn in zip(waiting, turns, strict=False):
            if turn.user_message.text == record.text:
                record.turn_id = turn.pk


def trial_turns(records: list[TurnRecord]) -> dict[int, Turn]:
    ids = [r.turn_id for r in records if r.turn_id is not None]
    turns = Turn.objects.filter(pk__in=ids).select_related("session", "user_message", "coach_message", "synth_message")
    return {turn.pk: turn for turn in turns}


def trial_runs(turns: dict[int, Turn]) -> list[AgentRun]:
    return list(AgentRun.objects.filter(turn_id__in=list(turns)).order_by("turn_id", "started_at"))


# --- What the coachee saw, checked again --------------------------------------------------------


def fixed_texts() -> dict[str, str]:
    """The product's own fixed texts, by text: fallbacks and the crisis pre-gate's calm replies."""
    fixed = {finish.FALLBACK_REPLY: "fallback"}
    fixed.update(dict.fromkeys(finish.FALLBACK_REPLIES.values(), "fallback"))
    fixed.update(dict.fromkeys(reply_gate.WITHDRAWN_NOTICES.values(), "withdrawn notice"))
    fixed.update(dict.fromkeys(replies.CRISIS_REPLIES.values(), "crisis reply"))
    fixed.update(dict.fromkeys(replies.ABUSE_REPLIES.values(), "crisis reply"))
    fixed.update(dict.fromkeys(replies.SOMEONE_ELSE_REPLIES.values(), "crisis reply"))
    return fixed


def prompt_wording() -> list[str]:
    """Every active agent prompt: a reply repeating a line of any of them is an echo."""
    return list(PromptVersion.objects.filter(status=PromptStatus.ACTIVE).values_list("body", flat=True))


def blocked_at(turn: Turn, runs: list[AgentRun]) -> dict[str, list[str]]:
    """Each move blocked for this coachee at this turn, with where the block came from."""
    sources: dict[str, list[str]] = {}

    def add(keys: Any, source: str) -> None:
        for key in keys or []:
            sources.setdefault(str(key), []).append(source)

    add(coach.previous_blocked_moves(turn), "previous Stability")
    stability = [r for r in runs if r.agent == Agent.STABILITY and r.status == RunStatus.SUCCEEDED]
    if stability:
        add((stability[-1].parsed_output or {}).get("blocked_moves"), "Stability")
    add((turn.brief or {}).get("blocked_moves"), "brief")
    return sources


def check_text(shown: ShownText, expect: quality.Expectations, *, cut_off: bool = False) -> ShownText:
    findings = quality.reply_findings(shown.text, expect, cut_off=cut_off)
    shown.junk = [str(f) for f in findings if f.check != "blocked_move"]
    shown.blocked = [f.detail for f in findings if f.check == "blocked_move"]
    return shown


def shown_texts(record: TurnRecord, turn: Turn, runs: list[AgentRun], context: dict[str, Any]) -> list[ShownText]:
    """Coach's reply (unless withdrawn) and Synth's answer or fallback, each checked again."""
    blocked = blocked_at(turn, runs)
    wording = [turn.shared_prompt, *context["prompts"], *(r.extra_instructions for r in runs if r.extra_instructions)]
    expect = reply_gate.expectations_for(turn, wording=wording, blocked=sorted(blocked), catalog=context["catalog"])
    fixed: dict[str, str] = context["fixed"]
    texts = []

    def shown(surface: str, kind: str, text: str, counted: bool = True) -> ShownText:
        return ShownText(turn.pk, record.conversation, record.index, surface, kind, text, counted=counted)

    message = turn.coach_message
    if message is not None and message.status == MessageStatus.WITHDRAWN:
        texts.append(shown("coach", "withdrawn notice", message.text, counted=False))
        if record.coach_streamed:
            # Streamed before the gate judged it at its end: on screen until it was withdrawn.
            texts.append(check_text(shown("coach", "streamed, then withdrawn", record.coach_streamed, False), expect))
    elif message is not None and message.text.strip():
        cut_off = message.status in (MessageStatus.FAILED, MessageStatus.STOPPED)
        kind = fixed.get(message.text, "reply")
        texts.append(check_text(shown("coach", kind, message.text), expect, cut_off=cut_off))
    if turn.synth_message is not None:
        kind = fixed.get(turn.synth_message.text, "reply")
        texts.append(check_text(shown("synth", kind, turn.synth_message.text), expect))
    return texts


def recheck(records: list[TurnRecord], turns: dict[int, Turn], runs: list[AgentRun]) -> list[ShownText]:
    context = {"prompts": prompt_wording(), "catalog": turn_setup.move_catalog(), "fixed": fixed_texts()}
    by_turn: dict[int, list[AgentRun]] = {}
    for run in runs:
        by_turn.setdefault(run.turn_id, []).append(run)
    checked = []
    for record in records:
        turn = turns.get(record.turn_id) if record.turn_id is not None else None
        if turn is not None:
            checked += shown_texts(record, turn, by_turn.get(turn.pk, []), context)
    return checked


def turn_rows(records: list[TurnRecord], turns: dict[int, Turn], runs: list[AgentRun]) -> list[dict[str, Any]]:
    """One row per message sent: timings, how the turn ended, what was blocked."""
    by_turn: dict[int, list[AgentRun]] = {}
    for run in runs:
        by_turn.setdefault(run.turn_id, []).append(run)
    fixed = fixed_texts()
    rows = []
    for record in records:
        row: dict[str, Any] = asdict(record)
        turn = turns.get(record.turn_id) if record.turn_id is not None else None
        if turn is not None:
            coach_message = turn.coach_message
            row.update(
                status=turn.status,
                degraded=turn.degraded,
                flagged=turn.flagged,
                flag_reason=turn.flag_reason,
                escalation=turn.escalation,
                # The crisis pre-gate answered at accept (its fixed reply shows at once, no model).
                pregate=turn.crisis_signal is not None,
                fallback=turn.synth_message is not None and fixed.get(turn.synth_message.text) == "fallback",
                coach_status=coach_message.status if coach_message else None,
                blocked=sorted(blocked_at(turn, by_turn.get(turn.pk, []))),
                db_seconds=(turn.finished_at - turn.started_at).total_seconds() if turn.finished_at else None,
            )
        rows.append(row)
    return rows


# --- What the product recorded ------------------------------------------------------------------


def gate_counts(turns: dict[int, Turn]) -> list[dict[str, Any]]:
    """QualityFinding rows of the trial's turns, counted per surface, check and action."""
    counts = Counter(
        QualityFinding.objects.filter(turn_id__in=list(turns)).values_list("surface", "check_name", "action")
    )
    return [
        {"surface": surface, "check": check, "action": action, "count": n}
        for (surface, check, action), n in sorted(counts.items())
    ]


def validity(runs: list[AgentRun]) -> dict[str, Any]:
    """Structured output per JSON agent: runs, model calls, valid at the first attempt and after
    another (a repair, or a resample of an answer cut off by its token limit), and every failure
    with the end of what the model wrote."""
    agents = []
    for agent in [a for a in AGENT_ORDER if a in JSON_AGENTS] + sorted(set(JSON_AGENTS) - set(AGENT_ORDER)):
        mine = [r for r in runs if r.agent == agent]
        if not mine:
            continue
        valid = [r for r in mine if r.status == RunStatus.SUCCEEDED]
        first = [r for r in valid if r.attempts == 1]
        invalid = [r for r in mine if r.status == RunStatus.FAILED and r.validation_errors]
        agents.append(
            {
                "agent": agent,
                "runs": len(mine),
                "calls": sum(r.attempts for r in mine),
                "valid_first": len(first),
                "valid_after_repair": len(valid) - len(first),
                "invalid": len(invalid),
                # Failed with nothing to judge (its deadline, the server), or never finished.
                "other_failures": sum(1 for r in mine if r.status == RunStatus.FAILED and not r.validation_errors),
                "unfinished": sum(1 for r in mine if r.status == RunStatus.RUNNING),
            }
        )
    failures = [
        {
            "agent": r.agent,
            "turn_id": r.turn_id,
            "round": r.round,
            "attempts": r.attempts,
            "error": r.error[:200],
            "validation_errors": [str(e)[:160] for e in (r.validation_errors or [])][:3],
            "raw_chars": len(r.raw_output),
            "completion_tokens": r.completion_tokens,
            "raw_end": r.raw_output[-RAW_END_CHARS:],
        }
        for r in runs
        if r.agent in JSON_AGENTS and r.status != RunStatus.SUCCEEDED
    ]
    json_runs = [r for r in runs if r.agent in JSON_AGENTS]
    totals = {
        "runs": len(json_runs),
        "calls": sum(r.attempts for r in json_runs),
        "valid_runs": sum(1 for r in json_runs if r.status == RunStatus.SUCCEEDED),
        "valid_first": sum(1 for r in json_runs if r.status == RunStatus.SUCCEEDED and r.attempts == 1),
    }
    return {"agents": agents, "totals": totals, "failures": failures}


def durations(runs: list[AgentRun]) -> list[dict[str, Any]]:
    """Per agent: p50 and p95 of AgentRun.latency_ms (its queueing for a slot included)."""
    rows = []
    for agent in [a for a in AGENT_ORDER if any(r.agent == a for r in runs)]:
        values = [r.latency_ms / 1000.0 for r in runs if r.agent == agent and r.latency_ms is not None]
        rows.append(
            {"agent": agent, "n": len(values), "p50_s": percentile(values, 50), "p95_s": percentile(values, 95)}
        )
    return rows


def totals(rows: list[dict[str, Any]], checked: list[ShownText]) -> dict[str, Any]:
    ended = [r for r in rows if r.get("status")]
    return {
        "messages_sent": len(rows),
        "turns": len(ended),
        "done": sum(1 for r in ended if r["status"] == "done"),
        "lost": sum(1 for r in rows if r["lost"]),
        "degraded": sum(1 for r in ended if r["degraded"]),
        "flagged": sum(1 for r in ended if r["flagged"]),
        "fallbacks": sum(1 for r in ended if r["fallback"]),
        "escalations": dict(Counter(r["escalation"] for r in ended if r["escalation"] != "none")),
        "pregate": sum(1 for r in ended if r["pregate"]),
        "coach_withdrawn": sum(1 for r in ended if r["coach_status"] == MessageStatus.WITHDRAWN),
        "texts_shown": sum(1 for c in checked if c.counted),
        "junk_shown": sum(1 for c in checked if c.counted and c.junk),
        "blocked_move_shown": sum(1 for c in checked if c.counted and c.blocked),
        # The blocked-move check means little where nothing was blocked: how often something was.
        "turns_with_blocked_moves": sum(1 for r in ended if r["blocked"]),
    }


def endpoints() -> list[dict[str, Any]]:
    """Which endpoint each agent used: the trial means nothing on the wrong engine."""
    return [
        {
            "agent": c.agent,
            "endpoint": c.endpoint.name,
            "kind": c.endpoint.kind,
            "model": c.endpoint.model_id,
            "base_url": c.endpoint.base_url,
            "max_tokens": c.max_tokens,
        }
        for c in AgentConfig.objects.select_related("endpoint").order_by("agent")
    ]
