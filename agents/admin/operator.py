"""Admin for operators: model endpoints, agent configs, the move catalog, crisis resources, the
crisis lexicon, coach assignments and quality findings; prompt versions are in prompt_versions.py,
the forms in forms.py. Declarations and thin views; the work is in agents/operations/.

Every change, and every connection test, is in Django's LogEntry, shown by each object's History
page and by the "Last change" column of the lists (AuditedAdmin).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.admin.utils import unquote
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db.models import CharField, Count, OuterRef, QuerySet, Subquery
from django.db.models.functions import Cast
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from agents.admin.forms import AgentConfigForm, AgentFallbackForm, ModelEndpointForm
from agents.admin.widgets import SafeAutocompleteMixin
from agents.models import (
    AgentConfig,
    AgentFallback,
    CoachAssignment,
    CoachingMove,
    CrisisPattern,
    CrisisResource,
    ModelEndpoint,
    PromptVersion,
    QualityFinding,
)
from agents.observability import metrics, stats
from agents.operations import prompts
from agents.operations.endpoints import agents_sharing, endpoint_test_connection

TEMPLATES = "admin/agents/"


def admin_url(model: type[Any] | Any, view: str, *args: Any) -> str:
    opts = model._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_{view}", args=args)


class AuditedAdmin(admin.ModelAdmin):
    """Lists show who changed each row last, and when, linked to its full history (LogEntry)."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        content_type = ContentType.objects.get_for_model(self.model)
        entries = LogEntry.objects.filter(
            content_type=content_type, object_id=Cast(OuterRef("pk"), output_field=CharField())
        ).order_by("-action_time", "-pk")
        return (
            super()
            .get_queryset(request)
            .annotate(
                last_change_at=Subquery(entries.values("action_time")[:1]),
                last_change_by=Subquery(entries.values("user__username")[:1]),
            )
        )

    @admin.display(description="Last change", ordering="last_change_at")
    def last_change(self, obj: Any) -> SafeString | str:
        at = getattr(obj, "last_change_at", None)
        if at is None:
            return "-"
        return format_html(
            '<a href="{}" title="Full history">{} by {}</a>',
            admin_url(self.model, "history", obj.pk),
            at.strftime("%Y-%m-%d %H:%M"),
            getattr(obj, "last_change_by", "") or "?",
        )


# --- Model endpoints -----------------------------------------------------------------------

# What a change record spells out, old → new: where the product sends data and which key.
AUDITED_ENDPOINT_FIELDS = ["name", "kind", "base_url", "model_id", "api_key_env", "trusted_for_coachee_data"]
RECENT_ENDPOINT_CHANGES = 20


@admin.register(ModelEndpoint)
class ModelEndpointAdmin(AuditedAdmin):
    """Platform administrators (group platform_admins, superusers) add and change endpoints and
    decide which are trusted for coachee data; operators see them and choose among them in the
    agent configs. Every change is in the history with its old and new values."""

    form = ModelEndpointForm
    list_display = [
        "name",
        "kind",
        "base_url",
        "model_id",
        "trusted_for_coachee_data",
        "used_by",
        "max_concurrency",
        "last_change",
    ]
    search_fields = ["name", "model_id", "base_url"]
    readonly_fields = ["used_by_detail", "created_at", "updated_at"]
    actions = ["test_connection"]
    fieldsets = [
        (None, {"fields": ["name", "kind", "base_url", "model_id", "api_key_env"]}),
        ("Trust", {"fields": ["trusted_for_coachee_data"]}),
        ("Limits", {"fields": ["max_concurrency", "connect_timeout_s", "read_timeout_s"]}),
        ("Shared by", {"fields": ["used_by_detail", "created_at", "updated_at"]}),
    ]

    def construct_change_message(self, request: HttpRequest, form: forms.Form, formsets: Any, add: bool = False) -> Any:
        if add:
            return super().construct_change_message(request, form, formsets, add)
        changes = [
            f"{form.fields[name].label or name}: {form.initial.get(name)!r} → {form.cleaned_data.get(name)!r}"
            for name in AUDITED_ENDPOINT_FIELDS
            if name in form.changed_data
        ]
        others = [form.fields[name].label or name for name in form.changed_data if name not in AUDITED_ENDPOINT_FIELDS]
        if others:
            changes.append("also changed " + ", ".join(str(label) for label in others))
        return "Changed " + "; ".join(changes) + "." if changes else "No fields changed."

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        extra = dict(extra_context or {})
        if self.has_change_permission(request):
            # Platform administrators see every endpoint change, by anyone, in one place.
            extra["endpoint_changes"] = (
                LogEntry.objects.filter(content_type=ContentType.objects.get_for_model(ModelEndpoint))
                .select_related("user")
                .order_by("-action_time", "-pk")[:RECENT_ENDPOINT_CHANGES]
            )
        return super().changelist_view(request, extra)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).prefetch_related("agent_configs")

    @admin.display(description="Agents using it")
    def used_by(self, obj: ModelEndpoint) -> str:
        return ", ".join(sorted(c.agent for c in obj.agent_configs.all())) or "-"

    @admin.display(description="Agents using this endpoint")
    def used_by_detail(self, obj: ModelEndpoint) -> SafeString | str:
        if obj.pk is None:
            return "-"
        configs = agents_sharing(obj)
        if not configs:
            return "No agent uses this endpoint."
        links = format_html_join(
            ", ",
            '<a href="{}">{}</a>',
            ((admin_url(AgentConfig, "change", c.pk), c.get_agent_display()) for c in configs),
        )
        if len(configs) == 1:
            return links
        return format_html("{} — they share one model instance: a change here affects all of them.", links)

    def get_urls(self) -> list[URLPattern]:
        info = (self.opts.app_label, self.opts.model_name)
        return [
            path(
                "<path:object_id>/test-connection/",
                self.admin_site.admin_view(self.test_connection_view),
                name="{}_{}_test_connection".format(*info),
            ),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        endpoint = self.get_object(request, unquote(object_id))
        can_test = endpoint is not None and endpoint.trusted_for_coachee_data and self.has_view_permission(request)
        extra = {**(extra_context or {}), "can_test": can_test}
        return super().change_view(request, object_id, form_url, extra)

    def _test_response(self, request: HttpRequest, endpoints: list[ModelEndpoint]) -> TemplateResponse:
        results = [endpoint_test_connection(e, user=request.user) for e in endpoints]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Connection test",
            "results": results,
            "has_view_permission": self.has_view_permission(request),
        }
        return TemplateResponse(request, TEMPLATES + "modelendpoint/test_connection.html", context)

    def test_connection_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        endpoint = self.get_object(request, unquote(object_id))
        if endpoint is None:
            raise Http404("No such model endpoint.")
        # Viewers may test (operators check a server is up); the test itself refuses endpoints
        # not marked trusted, since its request carries the API key.
        if not self.has_view_permission(request, endpoint):
            raise PermissionDenied
        if request.method != "POST":
            return HttpResponseRedirect(admin_url(ModelEndpoint, "change", endpoint.pk))
        return self._test_response(request, [endpoint])

    @admin.action(description="Test connection (list models, time a tiny completion)", permissions=["view"])
    def test_connection(self, request: HttpRequest, queryset: QuerySet[ModelEndpoint]) -> TemplateResponse:
        return self._test_response(request, list(queryset.order_by("name")[:10]))


# --- Agent configs -------------------------------------------------------------------------


class AgentFallbackInline(admin.TabularInline):
    """Tried in order when the primary's breaker is open or a call fails before its first token;
    Coach never switches endpoint once its reply has started."""

    model = AgentFallback
    form = AgentFallbackForm
    extra = 0
    ordering = ["position", "pk"]
    verbose_name = "fallback endpoint"
    verbose_name_plural = "Fallback endpoints (tried in order before the first token)"


@admin.register(AgentConfig)
class AgentConfigAdmin(AuditedAdmin):
    form = AgentConfigForm
    inlines = [AgentFallbackInline]
    list_display = [
        "agent",
        "endpoint_link",
        "temperature",
        "max_tokens",
        "context_budget",
        "thinking",
        "enabled",
        "fallback_list",
        "active_prompt",
        "last_change",
    ]
    list_editable = ["enabled"]
    list_select_related = ["endpoint"]
    change_list_template = TEMPLATES + "agentconfig/change_list.html"
    fields = ["agent", "endpoint", "temperature", "max_tokens", "context_budget", "thinking", "enabled", "updated_at"]
    readonly_fields = ["updated_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: AgentConfig | None = None) -> list[str]:
        # An agent's config is found by its agent: that never changes after it is made.
        return ["agent", "updated_at"] if obj is not None else ["updated_at"]

    def has_delete_permission(self, request: HttpRequest, obj: AgentConfig | None = None) -> bool:
        return False  # every agent needs a config (agents.E002); disable it instead

    def get_urls(self) -> list[URLPattern]:
        return [
            path("last-hour/", self.admin_site.admin_view(self.last_hour_view), name="agents_agentconfig_last_hour"),
            *super().get_urls(),
        ]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        return super().changelist_view(request, {**(extra_context or {}), "last_hour_url": "last-hour/"})

    def last_hour_view(self, request: HttpRequest) -> HttpResponse:
        """Per agent over the last hour, from AgentRun rows (observability.stats): for operators
        without Grafana. Figures only: no turn, coachee or text."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Agents in the last hour",
            "hours": stats.last_hour(),
            "reasons": stats.failure_reasons(),
            "outcomes": [(key, key.replace("_", " ").capitalize()) for key in metrics.OUTCOMES],
        }
        return TemplateResponse(request, TEMPLATES + "agentconfig/last_hour.html", context)

    @admin.display(description="Endpoint", ordering="endpoint__name")
    def endpoint_link(self, obj: AgentConfig) -> SafeString:
        return format_html(
            '<a href="{}">{}</a> <span class="quiet">{}</span>',
            admin_url(ModelEndpoint, "change", obj.endpoint_id),
            obj.endpoint.name,
            obj.endpoint.model_id,
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).prefetch_related("fallbacks__endpoint")

    @admin.display(description="Fallbacks")
    def fallback_list(self, obj: AgentConfig) -> str:
        return " → ".join(f.endpoint.name for f in obj.fallbacks.all()) or "-"

    @admin.display(description="Active prompt")
    def active_prompt(self, obj: AgentConfig) -> SafeString | str:
        version = prompts.active_version(obj.agent)
        if version is None:
            return format_html('<strong class="errornote-inline">{}</strong>', "none (agents.E001)")
        return format_html('<a href="{}">v{}</a>', admin_url(PromptVersion, "change", version.pk), version.version)


# --- The move catalog and the crisis configuration -------------------------------------------


@admin.register(CoachingMove)
class CoachingMoveAdmin(AuditedAdmin):
    list_display = ["key", "name", "pushes", "active", "last_change"]
    list_filter = ["pushes", "active"]
    search_fields = ["key", "name"]

    def get_readonly_fields(self, request: HttpRequest, obj: CoachingMove | None = None) -> list[str]:
        # Agents' outputs and stored runs name moves by key: a renamed key would orphan them.
        return ["key"] if obj is not None else []


@admin.register(CrisisResource)
class CrisisResourceAdmin(AuditedAdmin):
    # The source column lets operators check each number against the page it was taken from.
    list_display = ["locale", "kind", "order", "name", "contact", "source_link", "active", "last_change"]
    list_filter = ["locale", "kind", "active"]
    list_editable = ["order", "active"]
    search_fields = ["name", "contact", "description", "source_url"]

    @admin.display(description="Source")
    def source_link(self, obj: CrisisResource) -> str:
        if not obj.source_url:
            return "—"
        return format_html(
            '<a href="{}" target="_blank" rel="noopener noreferrer">{}</a>', obj.source_url, obj.source_url
        )

    ordering = ["locale", "order", "name"]


@admin.register(CrisisPattern)
class CrisisPatternAdmin(AuditedAdmin):
    list_display = ["id", "locale", "category", "pattern", "note", "active", "last_change"]
    list_filter = ["locale", "category", "active"]
    search_fields = ["pattern", "note"]


@admin.register(CoachAssignment)
class CoachAssignmentAdmin(SafeAutocompleteMixin, AuditedAdmin):
    """Which coach reviews which coachee: what the coach-side scoping is built on. Operators see
    it; superusers change it (the roles grant no one else add or change)."""

    list_display = ["coach", "coachee", "created_at", "last_change"]
    list_select_related = ["coach", "coachee"]
    search_fields = ["coach__username", "coachee__username"]
    autocomplete_fields = ["coach", "coachee"]


@admin.register(QualityFinding)
class QualityFindingAdmin(admin.ModelAdmin):
    """What the quality gate caught, per check: which checks fire how often, on which surface, and
    what was done. No turn link and no text: operators see no conversations."""

    list_display = ["created_at", "surface", "check_name", "action", "round", "detail"]
    list_filter = ["surface", "check_name", "action", ("created_at", admin.DateFieldListFilter)]
    fields = ["created_at", "surface", "check_name", "action", "round", "detail"]
    change_list_template = TEMPLATES + "qualityfinding/change_list.html"
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        if isinstance(response, TemplateResponse) and response.context_data is not None:
            # The counts follow the list's filters (its queryset).
            shown = response.context_data["cl"].queryset
            response.context_data["check_counts"] = list(
                shown.values("surface", "check_name", "action").annotate(count=Count("id")).order_by("-count")
            )
        return response
