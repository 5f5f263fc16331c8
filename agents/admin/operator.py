"""Admin for operators: model endpoints, agent configs, prompt versions, the move catalog,
crisis resources and the crisis lexicon. Declarations only; actions call services."""

from django.contrib import admin

from agents.models import AgentConfig, CoachingMove, CrisisPattern, CrisisResource, ModelEndpoint, PromptVersion


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
