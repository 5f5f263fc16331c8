"""The coaching domain: sessions, turns, agent runs, the blackboard and configuration.

No LLM calls and no I/O here: the turns and pipeline packages do the work.

Why one module of ~800 lines: it is the schema, plain data with constraints and labels and no
behaviour, read top to bottom in the order a turn creates its rows (session, message, turn, agent
run, blackboard, configuration). Every layer and all 27 migrations import it as agents.models;
a package of re-exports would add a hop for every reader and no separation of concerns.
"""

from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q

from agents.llm.keys import validate_api_key_env


class Agent(models.TextChoices):
    COACH = "coach", "Coach"
    SHADOW = "shadow", "Shadow"
    PERSONA = "persona", "Persona"
    PLASTICITY = "plasticity", "Plasticity"
    STABILITY = "stability", "Stability"
    SYNTH = "synth", "Synth"
    CRITIC = "critic", "Critic"
    # Not part of a turn: writes the checked session summaries, and judges the questions the
    # word check could not answer (compaction.py).
    SUMMARIZER = "summarizer", "Summarizer"
    SUMMARY_CHECK = "summary_check", "Summary check"


# The three specialists that run in parallel after Shadow.
SPECIALISTS = (Agent.PERSONA, Agent.PLASTICITY, Agent.STABILITY)


class EndpointKind(models.TextChoices):
    VLLM = "vllm", "vLLM"
    LLAMACPP = "llamacpp", "llama.cpp server"
    OPENAI = "openai", "OpenAI-compatible"


class ModelEndpoint(models.Model):
    name = models.SlugField(max_length=64, unique=True)
    kind = models.CharField(max_length=16, choices=EndpointKind.choices, default=EndpointKind.VLLM)
    # A CharField with an http(s) validator rather than URLField, whose validator refuses the
    # single-label hosts servers often have inside a cluster (http://vllm:8000/v1).
    base_url = models.CharField(
        max_length=300,
        validators=[RegexValidator(r"^https?://[^\s/]+(/\S*)?$", "Enter an http:// or https:// URL.")],
        help_text="OpenAI-compatible base URL, ending in /v1.",
    )
    model_id = models.CharField(max_length=200, help_text="The model name the server expects.")
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        validators=[validate_api_key_env],
        help_text="Name of the environment variable holding the API key (never the key itself); "
        "it must match COACHING_LLM_KEY_ENV_PATTERN (by default COACHING_LLM_KEY_*).",
    )
    max_concurrency = models.PositiveIntegerField(
        default=8,
        help_text="Most requests in flight to this server at once, across every process (a Redis lease semaphore "
        "in agents.llm.limits); a call waits for a free slot until its stage's deadline.",
    )
    connect_timeout_s = models.FloatField(default=5.0)
    read_timeout_s = models.FloatField(default=120.0, help_text="Longest wait for a response or the next token.")
    priority_scheduling = models.BooleanField(
        default=False,
        help_text="The server schedules by request priority (vLLM's --scheduling-policy priority): "
        "Coach's requests are then served ahead of the background agents'.",
    )
    # Set by a platform administrator only (operators cannot change endpoints): replays of past
    # runs send a coachee's stored prompt, and connection tests the API key, to this server.
    trusted_for_coachee_data = models.BooleanField(
        default=False,
        verbose_name="trusted for coachee data",
        help_text="A platform administrator vouches for this server: it may receive coachees' "
        "conversations (replays, agents) and the API key (connection tests).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Every way of saving (admin, shell command, update_or_create) refuses a key variable
        # outside the allow-list; update() bypasses save, so the client checks again per call.
        validate_api_key_env(self.api_key_env)
        super().save(*args, **kwargs)


class AgentConfig(models.Model):
    agent = models.CharField(max_length=16, choices=Agent.choices, unique=True)
    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.PROTECT, related_name="agent_configs")
    temperature = models.FloatField(default=0.3)
    max_tokens = models.PositiveIntegerField(default=600, help_text="Most tokens the agent may write.")
    context_budget = models.PositiveIntegerField(default=6000, help_text="Most prompt tokens the agent is given.")
    thinking = models.BooleanField(default=False, help_text="Let reasoning models think (Qwen3 chat template).")
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["agent"]

    def __str__(self) -> str:
        return f"{self.get_agent_display()} → {self.endpoint}"


class AgentFallback(models.Model):
    """One endpoint an agent falls back to, in order, when its primary's breaker is open or a
    call fails before its first token (agents.llm.routing)."""

    config = models.ForeignKey(AgentConfig, on_delete=models.CASCADE, related_name="fallbacks")
    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.PROTECT, related_name="fallback_for")
    position = models.PositiveSmallIntegerField(default=1, help_text="Tried in ascending order after the primary.")

    class Meta:
        ordering = ["config", "position", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["config", "endpoint"], name="fallback_endpoint_once_per_agent"),
        ]

    def __str__(self) -> str:
        return f"{self.config.agent} fallback {self.position}: {self.endpoint}"


class PromptStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    ACTIVE = "active", "Active"
    RETIRED = "retired", "Retired"


class PromptVersion(models.Model):
    agent = models.CharField(max_length=16, choices=Agent.choices)
    version = models.PositiveIntegerField()
    body = models.TextField()
    status = models.CharField(max_length=8, choices=PromptStatus.choices, default=PromptStatus.DRAFT)
    source = models.CharField(max_length=200, blank=True, help_text="Default file it was seeded from, if any.")
    source_sha256 = models.CharField(max_length=64, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    activated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    activated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["agent", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "version"], name="prompt_version_unique"),
            models.UniqueConstraint(fields=["agent"], condition=Q(status="active"), name="one_active_prompt_per_agent"),
        ]

    def __str__(self) -> str:
        return f"{self.agent} v{self.version} ({self.status})"


class CoachingMove(models.Model):
    key = models.SlugField(max_length=64, unique=True, help_text="Stable id the agents use.")
    name = models.CharField(max_length=120)
    description = models.TextField()
    pushes = models.BooleanField(
        default=False, help_text="Raises pressure on the coachee; never used when a high risk is in force."
    )
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return self.name


class SessionStatus(models.TextChoices):
    OPEN = "open", "Open"
    ENDED = "ended", "Ended"


class CoachingSession(models.Model):
    coachee = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="coaching_sessions")
    status = models.CharField(max_length=8, choices=SessionStatus.choices, default=SessionStatus.OPEN)
    locale = models.CharField(max_length=16, default="en")
    # The coachee's own name for it; blank: the page names it after their first words.
    title = models.CharField(max_length=120, blank=True)
    # The last sequence number handed out; messages and events share one sequence.
    last_seq = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["coachee", "-created_at"])]

    def __str__(self) -> str:
        return f"Session {self.pk} of {self.coachee}"


class Role(models.TextChoices):
    USER = "user", "Coachee"
    COACH = "coach", "Coach"
    SYNTH = "synth", "Synth"


class MessageStatus(models.TextChoices):
    STREAMING = "streaming", "Streaming"
    COMPLETE = "complete", "Complete"
    STOPPED = "stopped", "Stopped"
    FAILED = "failed", "Failed"
    # Failed the quality gate after it streamed: the text shown became a notice.
    WITHDRAWN = "withdrawn", "Withdrawn"


class Message(models.Model):
    session = models.ForeignKey(CoachingSession, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveBigIntegerField()
    role = models.CharField(max_length=8, choices=Role.choices)
    text = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=MessageStatus.choices, default=MessageStatus.COMPLETE)
    # Chosen by the browser, so a message re-sent after a reconnect is stored once. NULL (not "")
    # for messages without one, so the partial unique constraint ignores them.
    client_id = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="message_seq_unique"),
            models.UniqueConstraint(
                fields=["session", "client_id"], condition=Q(client_id__isnull=False), name="message_client_id_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.role}"


class TurnStatus(models.TextChoices):
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    STOPPED = "stopped", "Stopped"
    FAILED = "failed", "Failed"


class Escalation(models.TextChoices):
    NONE = "none", "None"
    MONITOR = "monitor", "Monitor"
    REFER = "refer", "Refer"
    CRISIS = "crisis", "Crisis"


class Turn(models.Model):
    session = models.ForeignKey(CoachingSession, on_delete=models.CASCADE, related_name="turns")
    user_message = models.OneToOneField(Message, on_delete=models.CASCADE, related_name="turn_as_user")
    coach_message = models.OneToOneField(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="turn_as_coach"
    )
    synth_message = models.OneToOneField(
        Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="turn_as_synth"
    )
    status = models.CharField(max_length=8, choices=TurnStatus.choices, default=TurnStatus.RUNNING)
    degraded = models.BooleanField(default=False)
    flagged = models.BooleanField(default=False)
    flag_reason = models.CharField(max_length=200, blank=True)
    escalation = models.CharField(max_length=8, choices=Escalation.choices, default=Escalation.NONE)
    # With one single-slot server for Coach and Shadow, the canvas waits for Coach's reply:
    # the coachee gets the immediate answer first instead of after Shadow.
    canvas_after_coach = models.BooleanField(default=False)
    # The blackboard as it was when the turn began: every agent of the turn sees the same
    # one, so their shared prompt prefix is identical (Shadow's new findings go after it).
    context_blackboard = models.ForeignKey(
        "BlackboardVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    brief = models.JSONField(null=True, blank=True, help_text="The arbitrated brief Synth was given.")
    shared_prompt = models.TextField(blank=True, help_text="The prompt prefix every agent of the turn was shown.")
    # The rest of the shared context, stored with the text so later steps load it instead of
    # rebuilding it (context.py): its token count, the citable message ids, what was left out.
    shared_tokens = models.PositiveIntegerField(null=True, blank=True)
    shared_message_ids = models.JSONField(default=list, blank=True)
    shared_dropped = models.JSONField(default=dict, blank=True)
    critic_result = models.JSONField(null=True, blank=True)
    crisis_signal = models.JSONField(
        null=True,
        blank=True,
        help_text="Which crisis layer fired at accept and why: a pattern's id, or the classifier's score and n-grams.",
    )
    # A coach who read the turn found its alarm false (the pre-gate's crisis card, or the refer or
    # crisis escalation its agents raised; review.annotations.alarm_dismiss): the turn no longer
    # holds the coachee's later replies for checking (reply_gate.risks_known); the card, the
    # signal and the escalation stay as they were, for the record.
    crisis_dismissed_at = models.DateTimeField(null=True, blank=True)
    crisis_dismissed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    crisis_dismissal_note = models.TextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    deadline_at = models.DateTimeField()
    coach_done_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["session", "started_at"]
        indexes = [models.Index(fields=["status", "deadline_at"])]

    def __str__(self) -> str:
        return f"Turn {self.pk} ({self.status})"


class RunStatus(models.TextChoices):
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


class AgentRun(models.Model):
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="agent_runs")
    agent = models.CharField(max_length=16, choices=Agent.choices)
    # Synth and the critic may run a second round after a violation.
    round = models.PositiveSmallIntegerField(default=1)
    status = models.CharField(max_length=10, choices=RunStatus.choices, default=RunStatus.RUNNING)
    prompt_version = models.ForeignKey(PromptVersion, null=True, blank=True, on_delete=models.SET_NULL)
    # The endpoint that answered (a fallback's, when the primary failed before its first token).
    endpoint = models.ForeignKey(ModelEndpoint, null=True, blank=True, on_delete=models.SET_NULL)
    model_id = models.CharField(max_length=200, blank=True)
    fallback_from = models.ForeignKey(
        ModelEndpoint,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The primary endpoint this run fell back from, if it did.",
    )
    slot_wait_ms = models.PositiveIntegerField(
        null=True, blank=True, help_text="Time spent waiting for a free slot under the endpoints' concurrency limits."
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    # Counted by the context builder before the call (the server's count is prompt_tokens).
    context_tokens = models.PositiveIntegerField(null=True, blank=True)
    context_dropped = models.JSONField(default=dict, blank=True, help_text="What the context builder left out.")
    # The agent's own inputs, so a draft prompt can be replayed on exactly what this run saw.
    prompt_values = models.JSONField(default=dict, blank=True)
    extra_instructions = models.TextField(blank=True)
    enums = models.JSONField(default=dict, blank=True, help_text="Allowed moves and message ids.")
    raw_output = models.TextField(blank=True)
    parsed_output = models.JSONField(null=True, blank=True)
    validation_errors = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["turn", "started_at"]
        constraints = [
            # Idempotency: a redelivered task finds its run instead of making a second one.
            models.UniqueConstraint(fields=["turn", "agent", "round"], name="agent_run_once_per_round"),
        ]

    def __str__(self) -> str:
        return f"{self.agent} on turn {self.turn_id} ({self.status})"


class EvaluationSet(models.Model):
    """Past runs of one agent that every draft of its prompt is replayed on and scored against
    before it is activated, so a change is never made blind."""

    name = models.CharField(max_length=100, unique=True)
    agent = models.CharField(max_length=16, choices=Agent.choices)
    runs = models.ManyToManyField(AgentRun, related_name="evaluation_sets")
    note = models.TextField(blank=True, help_text="What the set covers and why these turns.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["agent", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.agent})"


class ReplayStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class ReplayJob(models.Model):
    """A draft prompt replayed on past runs in the background (a Celery task), so the operator's
    page neither blocks nor loses the result: it shows progress and can be left and reopened."""

    version = models.ForeignKey(PromptVersion, on_delete=models.CASCADE, related_name="replay_jobs")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    evaluation_set = models.ForeignKey(
        EvaluationSet, null=True, blank=True, on_delete=models.SET_NULL, related_name="replay_jobs"
    )
    run_ids = models.JSONField(default=list, help_text="The past runs to replay on, in the order chosen.")
    status = models.CharField(max_length=8, choices=ReplayStatus.choices, default=ReplayStatus.QUEUED)
    done = models.PositiveSmallIntegerField(default=0, help_text="Runs finished so far.")
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"replay of {self.version} on {len(self.run_ids)} runs ({self.status})"

    @property
    def total(self) -> int:
        return len(self.run_ids)

    @property
    def finished(self) -> bool:
        return self.status in (ReplayStatus.DONE, ReplayStatus.FAILED)


class ReplayJobResult(models.Model):
    """What the draft made of one past run's inputs. Deleted with the run (a coachee's erasure
    removes their runs), and its raw output is pruned with theirs."""

    job = models.ForeignKey(ReplayJob, on_delete=models.CASCADE, related_name="results")
    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="replay_results")
    ran = models.BooleanField(default=False)
    valid = models.BooleanField(default=False)
    output = models.JSONField(null=True, blank=True)
    raw_output = models.TextField(blank=True)
    errors = models.JSONField(default=list, blank=True)
    failure = models.TextField(blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    calls = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["job", "pk"]
        constraints = [models.UniqueConstraint(fields=["job", "run"], name="replay_result_once_per_run")]

    def __str__(self) -> str:
        return f"replay result for run {self.run_id}"


class SessionEvent(models.Model):
    """Every server event that matters after a reconnect, in the order it was sent."""

    session = models.ForeignKey(CoachingSession, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveBigIntegerField()
    type = models.CharField(max_length=32)
    payload = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="event_seq_unique")]

    def __str__(self) -> str:
        return f"{self.type} #{self.seq}"


class BlackboardVersion(models.Model):
    """One version of a coachee's shared memory; every write makes a new one."""

    coachee = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="blackboard_versions")
    version = models.PositiveIntegerField()
    data = models.JSONField()
    source_turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.SET_NULL)
    source_agent = models.CharField(max_length=16, choices=Agent.choices, blank=True)
    prompt_version = models.ForeignKey(PromptVersion, null=True, blank=True, on_delete=models.SET_NULL)
    # Set when a person (the coachee on their memory page) made this version.
    edited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["coachee", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["coachee", "version"], name="blackboard_version_unique"),
            # One write per turn and agent, so a redelivered Shadow task cannot write twice.
            models.UniqueConstraint(
                fields=["source_turn", "source_agent"],
                condition=Q(source_turn__isnull=False),
                name="blackboard_one_write_per_turn_agent",
            ),
        ]

    def __str__(self) -> str:
        return f"Blackboard v{self.version} of {self.coachee}"


class Conflict(models.Model):
    """A clash between two agents' outputs and the arbitration rule that decided it."""

    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="conflicts")
    rule = models.CharField(max_length=64)
    left_agent = models.CharField(max_length=16, choices=Agent.choices)
    left_claim = models.JSONField()
    right_agent = models.CharField(max_length=16, choices=Agent.choices)
    right_claim = models.JSONField()
    resolution = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["turn", "id"]

    def __str__(self) -> str:
        return f"{self.rule} on turn {self.turn_id}"


class CrisisCategory(models.TextChoices):
    """What a crisis signal is about; abuse has its own resources (domestic-violence lines)."""

    SUICIDE = "suicide", "Suicidal thoughts or plans"
    SELF_HARM = "self_harm", "Self-harm"
    MEANS = "means", "Means or method"
    EATING = "eating", "Not eating or drinking"
    ABUSE = "abuse", "Abuse or immediate danger"


class ResourceKind(models.TextChoices):
    CRISIS = "crisis", "Crisis line or emergency"
    ABUSE = "abuse", "Domestic violence line"


class CrisisResource(models.Model):
    """Where to get human help now, per locale; operators keep this list current."""

    locale = models.CharField(
        max_length=16, help_text="Language or region code, e.g. en, de, pt-BR; 'intl' for an unknown locale."
    )
    kind = models.CharField(max_length=8, choices=ResourceKind.choices, default=ResourceKind.CRISIS)
    source_url = models.URLField(blank=True, help_text="The public page the number was taken from (operators only).")
    name = models.CharField(max_length=120)
    contact = models.CharField(max_length=120, blank=True, help_text="Phone number or text line.")
    url = models.URLField(blank=True)
    description = models.CharField(max_length=300, blank=True)
    order = models.PositiveSmallIntegerField(default=0)
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["locale", "order", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.locale})"


class CrisisPattern(models.Model):
    """Crisis language the pre-gate recognises before any model runs (operator-editable)."""

    locale = models.CharField(max_length=16, help_text="The language it is written in (all are checked).")
    pattern = models.CharField(max_length=1000, help_text="A case-insensitive regular expression.")
    category = models.CharField(max_length=10, choices=CrisisCategory.choices, default=CrisisCategory.SUICIDE)
    note = models.CharField(max_length=200, blank=True)
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["locale", "pattern"]
        constraints = [models.UniqueConstraint(fields=["locale", "pattern"], name="crisis_pattern_unique")]

    def __str__(self) -> str:
        return f"{self.locale}: {self.pattern}"

    def clean(self) -> None:
        import re

        from django.core.exceptions import ValidationError

        try:
            re.compile(self.pattern, re.IGNORECASE)
        except re.error as exc:
            raise ValidationError({"pattern": f"Not a valid regular expression: {exc}"}) from exc


class AccountSettings(models.Model):
    """A coachee's own settings; the language chosen here wins over the browser's."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="account_settings")
    locale = models.CharField(max_length=16, blank=True, help_text="Empty: the browser's language.")

    def __str__(self) -> str:
        return f"Settings of {self.user}"


class CoachAssignment(models.Model):
    """Which coachees a coach (a person) reviews; coaches see only these in admin."""

    coach = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="coachee_assignments")
    coachee = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="coach_assignments")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["coach", "coachee"]
        constraints = [models.UniqueConstraint(fields=["coach", "coachee"], name="coach_assignment_unique")]

    def __str__(self) -> str:
        return f"{self.coach} reviews {self.coachee}"


class CoachInboxMark(models.Model):
    """When a coach last marked their inbox as seen: what is "new" is what came after."""

    coach = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="inbox_mark")
    seen_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.coach} saw everything before {self.seen_at:%Y-%m-%d %H:%M}"


class Annotation(models.Model):
    """A coach's review of a turn: a rating of the full answer, a flag, a note."""

    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="annotations")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    rating = models.PositiveSmallIntegerField(null=True, blank=True, help_text="The full answer, 1 (poor) to 5.")
    flagged = models.BooleanField(default=False)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["turn", "created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(rating__isnull=True) | Q(rating__gte=1, rating__lte=5), name="annotation_rating_1_to_5"
            )
        ]

    def __str__(self) -> str:
        return f"Annotation on turn {self.turn_id}"


class AnswerFeedback(models.Model):
    """The coachee's thumbs up or down on one full answer; one per answer, changeable. Shown to
    the assigned coach (a thumbs-down puts the turn in the review queue) and counted per prompt
    version of the Synth run that wrote the answer."""

    class Rating(models.IntegerChoices):
        UP = 1, "Helpful"
        DOWN = -1, "Not helpful"

    message = models.OneToOneField(Message, on_delete=models.CASCADE, related_name="feedback")
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="feedback")
    rating = models.SmallIntegerField(choices=Rating.choices)
    comment = models.CharField(max_length=500, blank=True)
    prompt_version = models.ForeignKey(
        PromptVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="answer_feedback"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [models.CheckConstraint(condition=Q(rating__in=[1, -1]), name="answer_feedback_rating_up_down")]
        indexes = [models.Index(fields=["prompt_version", "rating"])]

    def __str__(self) -> str:
        return f"{self.get_rating_display()} on message {self.message_id}"


class AccountDeletion(models.Model):
    """That an account was deleted, and when: no personal data (the user id is only hashed)."""

    subject = models.CharField(max_length=64, help_text="HMAC of the deleted user's id.")
    deleted_at = models.DateTimeField(auto_now_add=True)
    counts = models.JSONField(default=dict, help_text="How many rows of each kind were removed.")

    class Meta:
        ordering = ["-deleted_at"]

    def __str__(self) -> str:
        return f"Account deleted {self.deleted_at:%Y-%m-%d}"


class SummaryScope(models.TextChoices):
    SESSION = "session", "Whole session"
    IN_SESSION = "in_session", "Earlier part of an open session"


class SummaryStrategy(models.TextChoices):
    ABSTRACTIVE = "abstractive", "Abstractive"
    EXTRACTIVE = "extractive", "Extractive (facts listed verbatim)"


class SummaryStatus(models.TextChoices):
    VERIFIED = "verified", "Verified"
    FAILED = "failed", "Failed the check"
    FLAGGED = "flagged", "Failed every strategy; flagged to coaches"


class SessionSummary(models.Model):
    """One attempt at summarising a session (or its earlier part), with the check it went through.

    Only a verified summary replaces the transcript in later contexts; the last failed attempt
    is flagged, and the context builder shows a bounded transcript excerpt instead.
    """

    session = models.ForeignKey(CoachingSession, on_delete=models.CASCADE, related_name="summaries")
    scope = models.CharField(max_length=12, choices=SummaryScope.choices, default=SummaryScope.SESSION)
    # Messages up to and including this seq are what the summary covers.
    covers_until_seq = models.PositiveBigIntegerField()
    attempt = models.PositiveSmallIntegerField(default=1)
    strategy = models.CharField(max_length=12, choices=SummaryStrategy.choices)
    status = models.CharField(max_length=10, choices=SummaryStatus.choices)
    data = models.JSONField(null=True, blank=True, help_text="The structured summary (SummaryOutput).")
    check_result = models.JSONField(default=dict, blank=True, help_text="The questions asked and how each fared.")
    prompt_version = models.ForeignKey(PromptVersion, null=True, blank=True, on_delete=models.SET_NULL)
    model_id = models.CharField(max_length=200, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    raw_output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "scope", "covers_until_seq", "attempt"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "scope", "covers_until_seq", "attempt"], name="session_summary_attempt_unique"
            )
        ]
        indexes = [models.Index(fields=["status", "-created_at"])]

    def __str__(self) -> str:
        return f"Summary of session {self.session_id} (attempt {self.attempt}, {self.status})"


class PredictionStatus(models.TextChoices):
    OPEN = "open", "Open"
    RESOLVED = "resolved", "Resolved"


class Prediction(models.Model):
    """A Shadow follow-through prediction, kept as a ledger row until a later session resolves it."""

    coachee = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="predictions")
    turn = models.OneToOneField(Turn, on_delete=models.CASCADE, related_name="prediction")
    agent_run = models.ForeignKey(AgentRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    commitment = models.CharField(max_length=200)
    probability = models.FloatField(help_text="0 to 1.")
    horizon_days = models.PositiveSmallIntegerField()
    made_at = models.DateTimeField()
    due_at = models.DateTimeField()
    prompt_version = models.ForeignKey(PromptVersion, null=True, blank=True, on_delete=models.SET_NULL)
    model_id = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=8, choices=PredictionStatus.choices, default=PredictionStatus.OPEN)
    outcome = models.BooleanField(null=True, blank=True, help_text="Did the coachee do it?")
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by_turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    resolution_note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["coachee", "-made_at"]
        indexes = [models.Index(fields=["coachee", "status", "-made_at"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(probability__gte=0, probability__lte=1), name="prediction_probability_0_to_1"
            )
        ]

    def __str__(self) -> str:
        return f"Prediction {self.pk} ({self.status})"


class QualityFinding(models.Model):
    """One check of the quality gate (agents.safety.quality) that a coachee-visible text failed, and
    what was done about it; counted per check for operators."""

    class Surface(models.TextChoices):
        COACH = "coach", "Coach's reply"
        SYNTH = "synth", "Synth's reply"
        BLACKBOARD = "blackboard", "Blackboard write"

    class Action(models.TextChoices):
        REGENERATED = "regenerated", "Regenerated with the failure named"
        FALLBACK = "fallback", "Replaced by the fallback reply"
        WITHDRAWN = "withdrawn", "Withdrawn after streaming"
        WITHHELD = "withheld", "Held back, never shown"
        REFUSED = "refused", "Write refused"

    turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.CASCADE, related_name="quality_findings")
    surface = models.CharField(max_length=12, choices=Surface.choices)
    check_name = models.CharField(max_length=20)
    detail = models.CharField(max_length=200, blank=True)
    action = models.CharField(max_length=12, choices=Action.choices)
    round = models.PositiveSmallIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["check_name", "created_at"])]

    def __str__(self) -> str:
        return f"{self.surface} {self.check_name} ({self.action})"
