"""Typed shapes: what each agent must answer, and what travels over the WebSocket.

Field descriptions are written for the model: they are sent as part of the JSON schema.
Catalog moves and message ids are open sets that change at run time, so their fields carry
an `x-enum-source` marker; `llm.schema.json_schema_for` turns it into an `enum` for each
call and validation checks the same set through the `context` given to `model_validate`.
"""

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo
from pydantic_core import PydanticCustomError

from agents.text import unstorable_problem


def _in_context(source: str) -> AfterValidator:
    def check(value: Any, info: ValidationInfo) -> Any:
        allowed = (info.context or {}).get(source)
        if allowed is not None and value not in allowed:
            # The location names the field; the value itself is not echoed (it may be coachee text).
            raise ValueError(f"not one of the allowed {source.replace('_', ' ')}")
        return value

    return AfterValidator(check)


MoveKey = Annotated[
    str,
    Field(
        description="The key of a move from the coaching-move catalog.", json_schema_extra={"x-enum-source": "moves"}
    ),
    _in_context("moves"),
]
BlockedMoveKey = Annotated[
    str,
    Field(description="The key of a move that is blocked.", json_schema_extra={"x-enum-source": "blocked_moves"}),
    _in_context("blocked_moves"),
]
MessageRef = Annotated[
    int,
    Field(
        description="The id of a coachee message that shows this.", json_schema_extra={"x-enum-source": "message_ids"}
    ),
    _in_context("message_ids"),
]
Percent = Annotated[int, Field(ge=0, le=100)]
OneToFive = Annotated[int, Field(ge=1, le=5)]
# Limits sized for a small model (SmolLM2-135M loops inside strings and lists): the grammar closes a
# string or list at its limit, and the answer's longest form fits the agent's max_tokens
# (llm.schema.longest_answer_tokens; the operator form checks it).
ShortText = Annotated[str, Field(min_length=1, max_length=100)]


class AgentOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- Shadow -----------------------------------------------------------------------------

PatternClass = Literal[
    "avoidance",
    "overcommitment",
    "perfectionism",
    "procrastination",
    "people_pleasing",
    "all_or_nothing",
    "steady_progress",
    "unclear",
]


class EvidencedItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: ShortText = Field(description="One short sentence.")
    evidence: list[MessageRef] = Field(max_length=2, description="Ids of the coachee messages that show it.")


class FollowThroughPrediction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    commitment: ShortText = Field(description="What the coachee said they would do.")
    probability_pct: Percent = Field(description="Chance in percent that they will do it.")
    horizon_days: Annotated[int, Field(ge=1, le=30)] = Field(description="Within how many days.")
    rationale: ShortText


OpenPredictionRef = Annotated[
    int,
    Field(
        description="The id of an open prediction from an earlier session.",
        json_schema_extra={"x-enum-source": "open_predictions"},
    ),
    _in_context("open_predictions"),
]


class PredictionResolution(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prediction_id: OpenPredictionRef
    done: bool = Field(description="True if the coachee reports they did it, false if they report they did not.")
    evidence: ShortText = Field(description="What the coachee said about it, in a few words.")


class ShadowOutput(AgentOutput):
    stated_goals: list[EvidencedItem] = Field(max_length=2, description="Goals the coachee says they have.")
    revealed_priorities: list[EvidencedItem] = Field(
        max_length=2, description="What their behaviour shows they actually prioritise."
    )
    follow_through: FollowThroughPrediction
    pattern_class: PatternClass = Field(description="The behavioural pattern that fits best.")
    pattern_confidence_pct: Percent
    # Only open predictions the coachee has now reported on; empty when none is offered.
    resolutions: list[PredictionResolution] = Field(
        default_factory=list,
        max_length=3,
        description="Open predictions from earlier sessions that the coachee's words settle, if any.",
        json_schema_extra={"x-empty-unless": "open_predictions"},
    )


# --- Persona ----------------------------------------------------------------------------


class TraitScore(BaseModel):
    model_config = ConfigDict(extra="forbid")
    score: Percent = Field(description="0 = very low, 100 = very high.")
    # A half-width rather than two bounds: an inconsistent band cannot be expressed.
    uncertainty: Annotated[int, Field(ge=0, le=50)] = Field(description="Plus or minus this many points.")
    evidence: list[MessageRef] = Field(max_length=2)

    @property
    def band(self) -> tuple[int, int]:
        return max(0, self.score - self.uncertainty), min(100, self.score + self.uncertainty)


class OceanProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    openness: TraitScore
    conscientiousness: TraitScore
    extraversion: TraitScore
    agreeableness: TraitScore
    neuroticism: TraitScore


class GoalFollowThrough(BaseModel):
    model_config = ConfigDict(extra="forbid")
    goal: ShortText
    percent: Percent = Field(description="How often they follow through on this goal, in percent.")


class PersonaOutput(AgentOutput):
    ocean: OceanProfile
    recurring_goals: list[ShortText] = Field(max_length=2)
    follow_through: list[GoalFollowThrough] = Field(max_length=2)
    growth_edges: list[ShortText] = Field(max_length=2, description="Where the coachee can grow next.")


# --- Plasticity -------------------------------------------------------------------------

Strategy = Literal["explore", "support", "structure", "reframe", "challenge", "accountability"]
# Strategies that raise pressure; a high risk overrides them (arbitration.py).
PUSHING_STRATEGIES: frozenset[str] = frozenset({"challenge", "accountability"})


class CommunicationPreferences(BaseModel):
    model_config = ConfigDict(extra="forbid")
    directness: OneToFive = Field(description="1 = gentle and indirect, 5 = blunt.")
    warmth: OneToFive
    structure: OneToFive = Field(description="1 = free-flowing, 5 = steps and lists.")
    challenge: OneToFive
    pacing: OneToFive = Field(description="1 = slow, 5 = fast.")


class PlasticityOutput(AgentOutput):
    preferences: CommunicationPreferences
    strategy: Strategy
    suggested_moves: list[MoveKey] = Field(min_length=1, max_length=3)
    rationale: ShortText


# --- Stability --------------------------------------------------------------------------

EscalationLevel = Literal["none", "monitor", "refer", "crisis"]


class Risk(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: ShortText
    severity: OneToFive = Field(description="1 = minor, 5 = grave harm.")
    detectability: OneToFive = Field(description="1 = obvious, 5 = hard to notice in time.")
    reversibility: OneToFive = Field(description="1 = easily undone, 5 = irreversible.")

    @property
    def priority(self) -> int:
        """Risk priority number, as in FMEA: 1 (negligible) to 125 (worst)."""
        return self.severity * self.detectability * self.reversibility


class StabilityOutput(AgentOutput):
    risks: list[Risk] = Field(max_length=3)
    blocked_moves: list[MoveKey] = Field(max_length=5, description="Moves that could harm this coachee now.")
    escalation: EscalationLevel
    rationale: ShortText


# --- Synth and the critic ---------------------------------------------------------------

Signal = Literal["coach", "shadow", "persona", "plasticity", "stability"]


class SynthOutput(AgentOutput):
    reply: Annotated[str, Field(min_length=1, max_length=1200)] = Field(
        description="The full reply to the coachee, in Markdown."
    )
    moves_used: list[MoveKey] = Field(max_length=3)
    signals_used: list[Signal] = Field(max_length=5)
    signals_missing: list[Signal] = Field(max_length=5)


UnsafeContent = Literal["method_or_means", "diagnosis", "medication_advice", "claims_to_be_human"]


class CriticOutput(AgentOutput):
    violated_moves: list[BlockedMoveKey] = Field(max_length=5, description="Blocked moves the reply uses.")
    unsafe_content: list[UnsafeContent] = Field(max_length=4)
    explanation: ShortText


# --- Summarizer (compaction between and inside sessions) -------------------------------


class SummaryCommitment(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: ShortText = Field(description="What the coachee committed to, in their words.")
    # Free text rather than a date pattern: the schema and the validator must agree, and not
    # every grammar compiler takes `pattern`. The context builder reads YYYY-MM-DD when it is one.
    due: Annotated[str, Field(min_length=1, max_length=40)] | None = Field(
        description="When it is due, as YYYY-MM-DD if a date or number of days was said; else null."
    )


class SummaryOutput(AgentOutput):
    goals: list[ShortText] = Field(max_length=6, description="Goals the coachee stated in the session.")
    commitments: list[SummaryCommitment] = Field(max_length=8, description="Every commitment the coachee made.")
    open_threads: list[ShortText] = Field(max_length=5, description="Topics left open for next time.")
    patterns: list[PatternClass] = Field(max_length=3, description="Behavioural patterns seen in the session.")
    blocked_moves: list[MoveKey] = Field(max_length=5, description="Coaching moves still blocked for this coachee.")
    overview: Annotated[str, Field(min_length=1, max_length=400)] = Field(description="Two or three sentences.")


QuestionRef = Annotated[
    int,
    Field(description="The number of a question.", json_schema_extra={"x-enum-source": "question_ids"}),
    _in_context("question_ids"),
]


class CheckAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: QuestionRef
    answered: bool = Field(description="True only if the summary itself states the answer.")
    quote: Annotated[str, Field(max_length=300)] = Field(
        description="The exact words of the summary that answer it, copied character for character; empty if none."
    )


class SummaryCheckOutput(AgentOutput):
    answers: list[CheckAnswer] = Field(max_length=12, description="One answer per question.")


OUTPUT_SCHEMAS: dict[str, type[AgentOutput]] = {
    "shadow": ShadowOutput,
    "persona": PersonaOutput,
    "plasticity": PlasticityOutput,
    "stability": StabilityOutput,
    "synth": SynthOutput,
    "critic": CriticOutput,
    "summarizer": SummaryOutput,
    "summary_check": SummaryCheckOutput,
}


# --- WebSocket frames: client → server --------------------------------------------------


class ClientFrame(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


# A frame's text is refused when the database cannot store it (agents/text.py), with its own
# error type: the socket answers `error {code: "unstorable_text"}` before anything is written.
UNSTORABLE_TEXT = "unstorable_text"


def _storable(value: str) -> str:
    problem = unstorable_problem(value)
    if problem is not None:
        raise PydanticCustomError(UNSTORABLE_TEXT, "The text {problem}.", {"problem": problem})
    return value


class UserMessageFrame(ClientFrame):
    type: Literal["user.message"]
    client_id: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
    text: Annotated[str, Field(min_length=1), AfterValidator(_storable)]


# The largest integer JavaScript represents exactly; far below PostgreSQL's bigint limit, which an
# unbounded value would overflow inside the replay query.
MAX_SEQ = 2**53 - 1


class ResumeFrame(ClientFrame):
    type: Literal["resume"]
    after_seq: Annotated[int, Field(ge=0, le=MAX_SEQ)]


class StopFrame(ClientFrame):
    type: Literal["stop"]


class PingFrame(ClientFrame):
    type: Literal["ping"]


InboundFrame = Annotated[UserMessageFrame | ResumeFrame | StopFrame | PingFrame, Field(discriminator="type")]


# --- WebSocket events: server → client --------------------------------------------------
# Events with a seq are persisted (SessionEvent) before they are sent and replayed on resume.


class ServerEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MessageAcceptedEvent(ServerEvent):
    type: Literal["message.accepted"]
    seq: int
    turn_id: int
    message_id: int
    client_id: str | None
    text: str


class CoachDeltaEvent(ServerEvent):
    type: Literal["coach.delta"]
    turn_id: int
    message_id: int
    offset: int = Field(description="Character offset of `text` in the whole reply, for de-duplication.")
    text: str


class CoachSnapshotEvent(ServerEvent):
    type: Literal["coach.snapshot"]
    turn_id: int
    message_id: int
    text: str


class CoachStartedEvent(ServerEvent):
    type: Literal["coach.started"]
    seq: int
    turn_id: int
    message_id: int


class CoachDoneEvent(ServerEvent):
    type: Literal["coach.done"]
    seq: int
    turn_id: int
    message_id: int
    text: str
    status: str


class AgentStatusEvent(ServerEvent):
    """Live progress, not persisted (no seq); a resuming client gets the current states."""

    type: Literal["agent.status"]
    turn_id: int
    agent: str
    state: Literal["started", "succeeded", "failed"]
    ms: int | None


class SynthDoneEvent(ServerEvent):
    type: Literal["synth.done"]
    seq: int
    turn_id: int
    message_id: int
    completes_message_id: int | None
    text: str
    html: str
    fallback: bool


class TurnDoneEvent(ServerEvent):
    type: Literal["turn.done"]
    seq: int
    turn_id: int
    status: str
    degraded: bool
    flagged: bool
    missing: list[str]


class CrisisResourceItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    contact: str
    url: str
    description: str


class SafetyNoticeEvent(ServerEvent):
    type: Literal["safety.notice"]
    seq: int
    turn_id: int
    level: Literal["refer", "crisis"]
    category: Literal["suicide", "self_harm", "means", "eating", "abuse"] = "suicide"
    resources: list[CrisisResourceItem]
    title: str = ""  # the card's heading and footer, in the coachee's language
    footer: str = ""
    someone_else: bool = False  # the words told someone else's crisis: card and reply speak to a helper


class ServiceDegradedEvent(ServerEvent):
    """Some model endpoint is failing: the message is saved, the answer will be shorter."""

    type: Literal["service.degraded"]
    seq: int
    turn_id: int
    reason: Literal["endpoint_unavailable", "coach_failed"]
    text: str


class SessionEndedEvent(ServerEvent):
    type: Literal["session.ended"]
    seq: int


class ErrorEvent(ServerEvent):
    type: Literal["error"]
    seq: int | None = None
    code: str
    detail: str
    turn_id: int | None = None
    client_id: str | None = None  # the refused message's, so the page can keep it to send later


class PongEvent(ServerEvent):
    type: Literal["pong"]


SERVER_EVENTS: dict[str, type[ServerEvent]] = {
    "message.accepted": MessageAcceptedEvent,
    "coach.started": CoachStartedEvent,
    "coach.delta": CoachDeltaEvent,
    "coach.snapshot": CoachSnapshotEvent,
    "coach.done": CoachDoneEvent,
    "agent.status": AgentStatusEvent,
    "synth.done": SynthDoneEvent,
    "turn.done": TurnDoneEvent,
    "safety.notice": SafetyNoticeEvent,
    "service.degraded": ServiceDegradedEvent,
    "session.ended": SessionEndedEvent,
    "error": ErrorEvent,
    "pong": PongEvent,
}
