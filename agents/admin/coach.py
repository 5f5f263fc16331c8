"""Admin for coaches: sessions, turns, agent runs, the blackboard and conflicts.
Declarations only; actions call services."""

from django.contrib import admin

from agents.models import AgentRun, BlackboardVersion, CoachingSession, Conflict, Message, Turn


class MessageInline(admin.TabularInline):
    model = Message
    fields = readonly_fields = ("seq", "role", "status", "text", "created_at")
    extra = 0
    can_delete = False


@admin.register(CoachingSession)
class CoachingSessionAdmin(admin.ModelAdmin):
    list_display = ["id", "coachee", "status", "created_at", "ended_at"]
    list_filter = ["status"]
    inlines = [MessageInline]
    readonly_fields = ["last_seq"]


class AgentRunInline(admin.TabularInline):
    model = AgentRun
    fields = readonly_fields = (
        "agent",
        "round",
        "status",
        "attempts",
        "prompt_tokens",
        "completion_tokens",
        "latency_ms",
        "error",
    )
    extra = 0
    can_delete = False


class ConflictInline(admin.TabularInline):
    model = Conflict
    fields = readonly_fields = ("rule", "left_agent", "left_claim", "right_agent", "right_claim", "resolution")
    extra = 0
    can_delete = False


@admin.register(Turn)
class TurnAdmin(admin.ModelAdmin):
    list_display = ["id", "session", "status", "degraded", "flagged", "escalation", "started_at", "finished_at"]
    list_filter = ["status", "degraded", "flagged", "escalation"]
    inlines = [AgentRunInline, ConflictInline]
    readonly_fields = ["user_message", "coach_message", "synth_message", "brief", "critic_result", "context_blackboard"]


@admin.register(AgentRun)
class AgentRunAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "turn",
        "agent",
        "round",
        "status",
        "attempts",
        "prompt_tokens",
        "completion_tokens",
        "latency_ms",
    ]
    list_filter = ["agent", "status"]
    list_select_related = ["turn"]


@admin.register(BlackboardVersion)
class BlackboardVersionAdmin(admin.ModelAdmin):
    list_display = ["coachee", "version", "source_turn", "source_agent", "created_at"]


@admin.register(Conflict)
class ConflictAdmin(admin.ModelAdmin):
    list_display = ["turn", "rule", "left_agent", "right_agent", "created_at"]
    list_filter = ["rule"]
