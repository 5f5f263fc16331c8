"""Admin: configuration for operators, read-only review for coaches.

Declarations only; anything that changes state goes through services. The full coach
review and prompt-operations experience is built on top of these registrations.
"""

from django.contrib import admin

from agents.models import (
    AgentConfig,
    AgentRun,
    BlackboardVersion,
    CoachingMove,
    CoachingSession,
    Conflict,
    CrisisPattern,
    CrisisResource,
    Message,
    ModelEndpoint,
    PromptVersion,
    Turn,
)


@admin.register(ModelEndpoint)
class ModelEndpointAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "base_url", "model_id", "max_concurrency", "read_timeout_s"]
    search_fields = ["name", "model_id"]


@admin.register(AgentConfig)
class AgentConfigAdmin(admin.ModelAdmin):
    list_display = ["agent", "endpoint", "temperature", "max_tokens", "context_budget", "thinking", "enabled"]
    list_editable = ["enabled"]
    list_select_related = ["endpoint"]


@admin.register(PromptVersion)
class PromptVersionAdmin(admin.ModelAdmin):
    list_display = ["agent", "version", "status", "source", "created_by", "created_at", "activated_at"]
    list_filter = ["agent", "status"]
    readonly_fields = ["source", "source_sha256", "created_by", "created_at", "activated_at"]


@admin.register(CoachingMove)
class CoachingMoveAdmin(admin.ModelAdmin):
    list_display = ["key", "name", "pushes", "active"]
    list_filter = ["pushes", "active"]
    search_fields = ["key", "name"]


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


@admin.register(CrisisResource)
class CrisisResourceAdmin(admin.ModelAdmin):
    list_display = ["locale", "order", "name", "contact", "url", "active"]
    list_filter = ["locale", "active"]
    list_editable = ["order", "active"]


@admin.register(CrisisPattern)
class CrisisPatternAdmin(admin.ModelAdmin):
    list_display = ["locale", "pattern", "note", "active"]
    list_filter = ["locale", "active"]
    search_fields = ["pattern", "note"]
