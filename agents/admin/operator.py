"""Admin for operators: model endpoints, agent configs, prompt versions, the move catalog,
crisis resources and the crisis lexicon. Declarations and thin views; the work is in
agents/operations/.

Prompt versions are immutable: "Edit as new draft" makes a new draft, which can be compared
with the active version, replayed on past runs of its agent (nothing stored changes), then
activated; the previous version can be restored with a rollback. Every change, and every
replay and connection test, is in Django's LogEntry, shown by each object's History page and
by the "Last change" column of the lists.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import LogEntry
from django.contrib.admin.utils import unquote
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db.models import CharField, Count, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Cast
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from agents import predictions, selectors
from agents.admin.widgets import SafeAutocompleteMixin
from agents.checks import base_url_problem
from agents.llm.schema import answer_token_bound
from agents.models import (
    Agent,
    AgentConfig,
    AgentFallback,
    CoachAssignment,
    CoachingMove,
    CrisisPattern,
    CrisisResource,
    EvaluationSet,
    ModelEndpoint,
    PromptStatus,
    PromptVersion,
    QualityFinding,
    ReplayJob,
)
from agents.observability import metrics, stats
from agents.operations import evaluation, prompts, replay
from agents.operations.diff import prompt_diff
from agents.operations.endpoints import agents_sharing, endpoint_test_connection
from agents.operations.errors import PromptOpError
from agents.prompts import PLACEHOLDERS, placeholders_in
from agents.schemas import OUTPUT_SCHEMAS

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


class ModelEndpointForm(forms.ModelForm):
    # Checked here as the system checks do (base_url_problem), with a clearer message.
    base_url = forms.CharField(
        label="Base URL",
        max_length=300,
        help_text="OpenAI-compatible base URL, ending in /v1 (e.g. http://vllm:8000/v1).",
        widget=forms.TextInput(attrs={"class": "vURLField"}),
    )

    class Meta:
        model = ModelEndpoint
        fields = [
            "name",
            "kind",
            "base_url",
            "model_id",
            "api_key_env",
            "max_concurrency",
            "connect_timeout_s",
            "read_timeout_s",
            "trusted_for_coachee_data",
        ]

    def clean_base_url(self) -> str:
        url = str(self.cleaned_data["base_url"]).strip()
        problem = base_url_problem(url)
        if problem is not None:
            raise forms.ValidationError(f"This endpoint would have {problem}.")
        return url

    def clean_max_concurrency(self) -> int:
        value = int(self.cleaned_data["max_concurrency"])
        if value < 1:
            raise forms.ValidationError("At least 1.")
        return value

    def clean_connect_timeout_s(self) -> float:
        return _positive(self.cleaned_data["connect_timeout_s"])

    def clean_read_timeout_s(self) -> float:
        return _positive(self.cleaned_data["read_timeout_s"])


def _positive(value: float) -> float:
    if value is None or value <= 0:
        raise forms.ValidationError("Must be more than 0 seconds.")
    return float(value)


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


class AgentConfigForm(forms.ModelForm):
    class Meta:
        model = AgentConfig
        fields = ["agent", "endpoint", "temperature", "max_tokens", "context_budget", "thinking", "enabled"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Agents send coachees' conversations to their endpoint: operators choose among the
        # endpoints a platform administrator trusted (the current one stays choosable).
        field = self.fields.get("endpoint")
        if isinstance(field, forms.ModelChoiceField):
            current = self.instance.endpoint_id if self.instance.pk else None
            field.queryset = ModelEndpoint.objects.filter(Q(trusted_for_coachee_data=True) | Q(pk=current))
            field.help_text = "Only endpoints a platform administrator marked trusted for coachee data."

    def clean_temperature(self) -> float:
        value = float(self.cleaned_data["temperature"])
        if not 0.0 <= value <= 2.0:
            raise forms.ValidationError("Between 0 and 2.")
        return value

    def clean_max_tokens(self) -> int:
        value = int(self.cleaned_data["max_tokens"])
        if not 1 <= value <= 32768:
            raise forms.ValidationError("Between 1 and 32768.")
        return value

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        # The agent is read-only once the config exists: it is then not in the form's data.
        agent, max_tokens = cleaned.get("agent") or self.instance.agent, cleaned.get("max_tokens")
        schema = OUTPUT_SCHEMAS.get(agent or "")
        if schema is not None and max_tokens:
            # Below this a long but valid answer is cut off by the token limit and fails.
            needed = answer_token_bound(schema, move_keys=list(CoachingMove.objects.values_list("key", flat=True)))
            if max_tokens < needed:
                self.add_error(
                    "max_tokens",
                    f"This agent's answer format allows up to about {needed} tokens; "
                    f"below that a long answer is cut off and fails. Use at least {needed}.",
                )
        return cleaned

    def clean_context_budget(self) -> int:
        value = int(self.cleaned_data["context_budget"])
        if not 256 <= value <= 1_000_000:
            raise forms.ValidationError("Between 256 and 1000000 tokens.")
        return value


class AgentFallbackForm(forms.ModelForm):
    class Meta:
        model = AgentFallback
        fields = ["position", "endpoint"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The same rule as the primary: a fallback receives the same conversations.
        field = self.fields.get("endpoint")
        if isinstance(field, forms.ModelChoiceField):
            current = self.instance.endpoint_id if self.instance.pk else None
            field.queryset = ModelEndpoint.objects.filter(Q(trusted_for_coachee_data=True) | Q(pk=current))

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        endpoint = cleaned.get("endpoint")
        config = self.instance.config if self.instance.config_id else None
        if endpoint is not None and config is not None and endpoint.pk == config.endpoint_id:
            raise forms.ValidationError("The primary endpoint cannot also be a fallback.")
        return cleaned


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


# --- Prompt versions -----------------------------------------------------------------------


class DraftForm(forms.Form):
    body = forms.CharField(
        strip=False,
        widget=forms.Textarea(attrs={"rows": 28, "class": "prompt-editor", "spellcheck": "false"}),
        help_text="Placeholders are written ${name}; write $$ for a dollar sign.",
    )

    def __init__(self, *args: Any, agent: str, base: PromptVersion | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.agent = agent
        self.base = base

    def clean_body(self) -> str:
        body = str(self.cleaned_data["body"]).replace("\r\n", "\n")
        errors = prompts.prompt_body_errors(self.agent, body)
        if errors:
            raise forms.ValidationError(errors)
        if self.base is not None and body == self.base.body:
            raise forms.ValidationError(f"Nothing changed: this is the text of v{self.base.version}.")
        return body


@admin.register(PromptVersion)
class PromptVersionAdmin(AuditedAdmin):
    list_display = ["title", "status_badge", "created", "activated", "coachee_feedback", "links"]
    list_display_links = ["title"]
    list_filter = ["agent", "status"]
    list_select_related = ["created_by", "activated_by"]
    search_fields = ["body"]
    PROMPT_FIELDS = (
        "agent",
        "version",
        "status",
        "body_text",
        "uses",
        "created_by",
        "created_at",
        "activated_by",
        "activated_at",
        "source",
        "source_sha256",
    )
    fields = PROMPT_FIELDS
    readonly_fields = PROMPT_FIELDS

    # Versions are immutable and are the record of what ran: edits make new drafts, and the
    # standard change form is a read-only view with the operator's actions above it.
    def has_change_permission(self, request: HttpRequest, obj: PromptVersion | None = None) -> bool:
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: PromptVersion | None = None) -> bool:
        return False

    def can_change(self, request: HttpRequest) -> bool:
        return super().has_change_permission(request)

    @admin.display(description="Version", ordering="version")
    def title(self, obj: PromptVersion) -> str:
        return f"{obj.agent} v{obj.version}"

    @admin.display(description="Created", ordering="created_at")
    def created(self, obj: PromptVersion) -> str:
        by = f" by {obj.created_by}" if obj.created_by else " (seeded)"
        return f"{obj.created_at:%Y-%m-%d %H:%M}{by}"

    @admin.display(description="Activated", ordering="activated_at")
    def activated(self, obj: PromptVersion) -> str:
        if obj.activated_at is None:
            return "-"
        by = f" by {obj.activated_by}" if obj.activated_by else ""
        return f"{obj.activated_at:%Y-%m-%d %H:%M}{by}"

    @admin.display(description="Status", ordering="status")
    def status_badge(self, obj: PromptVersion) -> SafeString:
        return format_html('<span class="pv-status pv-{}">{}</span>', obj.status, obj.get_status_display())

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return selectors.with_feedback_counts(super().get_queryset(request))

    @admin.display(description="Coachee thumbs")
    def coachee_feedback(self, obj: PromptVersion) -> str:
        """Full answers this version wrote that coachees rated (Synth only)."""
        up, down = getattr(obj, "thumbs_up", 0), getattr(obj, "thumbs_down", 0)
        return f"{up} up · {down} down" if up or down else "-"

    @admin.display(description="Placeholders")
    def uses(self, obj: PromptVersion) -> str:
        try:
            return ", ".join(f"${{{n}}}" for n in sorted(placeholders_in(obj.body))) or "-"
        except ValueError as exc:
            return f"invalid: {exc}"

    @admin.display(description="Text")
    def body_text(self, obj: PromptVersion) -> SafeString:
        return format_html('<pre class="prompt-body">{}</pre>', obj.body)

    @admin.display(description="")
    def links(self, obj: PromptVersion) -> SafeString:
        items = [(admin_url(PromptVersion, "diff", obj.pk), "diff")]
        if replay.replayable(obj.agent):
            items.append((admin_url(PromptVersion, "replay", obj.pk), "replay"))
        if obj.status != PromptStatus.ACTIVE:
            items.append((admin_url(PromptVersion, "activate", obj.pk), "activate"))
        return format_html_join(" · ", '<a href="{}">{}</a>', items)

    # --- URLs and views ---

    def get_urls(self) -> list[URLPattern]:
        info = f"{self.opts.app_label}_{self.opts.model_name}"
        wrap = self.admin_site.admin_view
        return [
            path("new/<str:agent>/", wrap(self.new_draft_view), name=f"{info}_new"),
            path("rollback/<str:agent>/", wrap(self.rollback_view), name=f"{info}_rollback"),
            path("<path:object_id>/edit/", wrap(self.edit_view), name=f"{info}_edit"),
            path("<path:object_id>/diff/", wrap(self.diff_view), name=f"{info}_diff"),
            path("<path:object_id>/replay/<int:job_id>/", wrap(self.replay_job_view), name=f"{info}_replay_job"),
            path("<path:object_id>/replay/", wrap(self.replay_view), name=f"{info}_replay"),
            path("<path:object_id>/activate/", wrap(self.activate_view), name=f"{info}_activate"),
            *super().get_urls(),
        ]

    def _version(self, request: HttpRequest, object_id: str) -> PromptVersion:
        version = self.get_object(request, unquote(object_id))
        if version is None:
            raise Http404("No such prompt version.")
        return version

    def _context(self, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "has_view_permission": self.has_view_permission(request),
            "can_change": self.can_change(request),
            "can_add": self.has_add_permission(request),
            **extra,
        }

    def _agent_summary(self) -> list[dict[str, Any]]:
        rows = []
        versions = list(PromptVersion.objects.only("pk", "agent", "version", "status", "activated_at"))
        for agent in Agent.values:
            mine = [v for v in versions if v.agent == agent]
            active = next((v for v in mine if v.status == PromptStatus.ACTIVE), None)
            drafts = sorted((v for v in mine if v.status == PromptStatus.DRAFT), key=lambda v: -v.version)
            rows.append(
                {
                    "agent": agent,
                    "active": active,
                    "drafts": drafts[:3],
                    "more_drafts": max(0, len(drafts) - 3),
                    "rollback_to": prompts.rollback_target(agent),
                }
            )
        return rows

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        extra = {
            **(extra_context or {}),
            "agent_summary": self._agent_summary(),
            # Shadow's follow-through predictions, scored per prompt version and model.
            "brier_scores": predictions.brier_scores(),
            "can_change": self.can_change(request),
            "can_add": self.has_add_permission(request),
        }
        return super().changelist_view(request, extra)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        version = self._version(request, object_id)
        active = prompts.active_version(version.agent)
        extra = {
            **(extra_context or {}),
            "active": active,
            "diff": prompt_diff(active, version) if active and active.pk != version.pk else None,
            "rollback_to": prompts.rollback_target(version.agent) if version.status == PromptStatus.ACTIVE else None,
            "replayable": replay.replayable(version.agent),
            "can_change": self.can_change(request),
            "can_add": self.has_add_permission(request),
            "warnings": prompts.prompt_body_warnings(version.agent, version.body),
        }
        return super().change_view(request, object_id, form_url, extra)

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """Adding a version means writing a draft for an agent: choose the agent first."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        agent = request.GET.get("agent", "")
        if agent in Agent.values:
            return HttpResponseRedirect(admin_url(PromptVersion, "new", agent))
        choices = [(a, prompts.active_version(a)) for a in Agent.values]
        return TemplateResponse(
            request,
            TEMPLATES + "promptversion/choose_agent.html",
            self._context(request, "New prompt draft: which agent?", choices=choices),
        )

    def new_draft_view(self, request: HttpRequest, agent: str) -> HttpResponse:
        if agent not in Agent.values:
            raise Http404("No such agent.")
        active = prompts.active_version(agent)
        return self._draft(request, agent, active)

    def edit_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        version = self._version(request, object_id)
        return self._draft(request, version.agent, version)

    def _draft(self, request: HttpRequest, agent: str, base: PromptVersion | None) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        if request.method == "POST":
            form = DraftForm(request.POST, agent=agent, base=base)
            if form.is_valid():
                try:
                    draft = prompts.prompt_draft_create(
                        agent=agent, body=form.cleaned_data["body"], user=request.user, based_on=base
                    )
                except PromptOpError as exc:
                    form.add_error("body", str(exc))
                else:
                    origin = f" from v{base.version}" if base is not None else ""
                    messages.success(
                        request,
                        f"Saved {agent} v{draft.version} as a draft{origin}. Nothing runs it yet: compare it, "
                        "replay it on past turns, then activate it.",
                    )
                    for warning in prompts.prompt_body_warnings(agent, draft.body):
                        messages.warning(request, f"Note: {warning}.")
                    return HttpResponseRedirect(admin_url(PromptVersion, "change", draft.pk))
        else:
            form = DraftForm(initial={"body": base.body if base is not None else ""}, agent=agent, base=base)
        title = f"Edit {agent} v{base.version} as a new draft" if base is not None else f"New {agent} draft"
        context = self._context(
            request,
            title,
            form=form,
            agent=agent,
            base=base,
            original=base,
            allowed=sorted(PLACEHOLDERS[agent]),
        )
        return TemplateResponse(request, TEMPLATES + "promptversion/draft_form.html", context)

    def diff_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        version = self._version(request, object_id)
        others = list(PromptVersion.objects.filter(agent=version.agent).exclude(pk=version.pk).order_by("-version"))
        against_id = request.GET.get("against", "")
        against = next((v for v in others if str(v.pk) == against_id), None)
        if against is None:
            active = prompts.active_version(version.agent)
            if active is not None and active.pk != version.pk:
                against = active
            else:  # the active version itself: compare with the one before it
                against = next((v for v in others if v.version < version.version), others[0] if others else None)
        diff = prompt_diff(against, version)
        context = self._context(
            request,
            f"{version.agent} v{version.version} compared with " + (f"v{against.version}" if against else "nothing"),
            original=version,
            version=version,
            against=against,
            others=others,
            diff=diff,
        )
        return TemplateResponse(request, TEMPLATES + "promptversion/diff.html", context)

    def replay_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        version = self._version(request, object_id)
        if not self.can_change(request):
            raise PermissionDenied
        replayable = replay.replayable(version.agent)
        candidates = list(replay.replay_candidates(version.agent)) if replayable else []
        chosen = {c.pk for c in candidates[:3]}
        if request.method == "POST" and replayable:
            wanted = {int(v) for v in request.POST.getlist("runs") if v.isdigit()}
            chosen = wanted
            try:
                job = self._replay_post(request, version, [c.pk for c in candidates if c.pk in wanted])
            except PromptOpError as exc:
                messages.error(request, f"{str(exc)[:1].upper()}{str(exc)[1:]}.")
            else:
                if job is not None:
                    return redirect(admin_url(PromptVersion, "replay_job", version.pk, job.pk))
        context = self._context(
            request,
            f"Replay {version.agent} v{version.version} on past turns",
            original=version,
            version=version,
            replayable=replayable,
            candidates=candidates,
            chosen=chosen,
            jobs=list(version.replay_jobs.select_related("requested_by", "evaluation_set")[:10]),
            evaluation_sets=list(EvaluationSet.objects.filter(agent=version.agent).annotate(run_total=Count("runs"))),
            max_runs=replay.REPLAY_MAX_RUNS,
            total_timeout_s=int(replay.REPLAY_TOTAL_TIMEOUT_S),
            endpoint=AgentConfig.objects.select_related("endpoint").filter(agent=version.agent).first(),
        )
        return TemplateResponse(request, TEMPLATES + "promptversion/replay.html", context)

    def _replay_post(self, request: HttpRequest, version: PromptVersion, run_ids: list[int]) -> ReplayJob | None:
        """The replay form's three buttons: replay the chosen runs, keep them as an evaluation set,
        or run the version on a kept set. Returns the queued job, if one was."""
        if "save_set" in request.POST:
            kept = evaluation.evaluation_set_create(
                name=request.POST.get("set_name", ""), agent=version.agent, run_ids=run_ids, user=request.user
            )
            messages.success(request, f"Kept {kept.runs.count()} runs as the evaluation set {kept.name}.")
            return None
        if request.POST.get("evaluate", "").isdigit():
            evaluation_set = get_object_or_404(EvaluationSet, pk=int(request.POST["evaluate"]), agent=version.agent)
            return evaluation.evaluation_run_start(version=version, evaluation_set=evaluation_set, user=request.user)
        return replay.replay_job_start(version=version, run_ids=run_ids, user=request.user)

    def replay_job_view(self, request: HttpRequest, object_id: str, job_id: int) -> HttpResponse:
        version = self._version(request, object_id)
        if not self.can_change(request):
            raise PermissionDenied
        job = get_object_or_404(version.replay_jobs.select_related("requested_by", "evaluation_set"), pk=job_id)
        report = replay.replay_job_report(job)
        context = self._context(
            request,
            f"Replay {version.agent} v{version.version} on past turns",
            original=version,
            version=version,
            job=job,
            report=report,
            score=evaluation.replay_score(report) if job.finished else None,
        )
        return TemplateResponse(request, TEMPLATES + "promptversion/replay_job.html", context)

    def activate_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        version = self._version(request, object_id)
        if not self.can_change(request):
            raise PermissionDenied
        if request.method == "POST":
            try:
                previous = prompts.active_version(version.agent)
                prompts.prompt_version_activate(version=version, user=request.user)
            except PromptOpError as exc:
                messages.error(request, str(exc))
            else:
                retired = f" (v{previous.version} retired)" if previous is not None else ""
                messages.success(
                    request,
                    f"Activated {version.agent} v{version.version}{retired}: the next {version.agent} run uses it.",
                )
            return HttpResponseRedirect(admin_url(PromptVersion, "change", version.pk))
        active = prompts.active_version(version.agent)
        context = self._context(
            request,
            f"Activate {version.agent} v{version.version}?",
            original=version,
            version=version,
            active=active,
            diff=prompt_diff(active, version),
            errors=prompts.prompt_body_errors(version.agent, version.body),
            evaluations=evaluation.evaluation_rows(version, active),
        )
        return TemplateResponse(request, TEMPLATES + "promptversion/activate.html", context)

    def rollback_view(self, request: HttpRequest, agent: str) -> HttpResponse:
        if agent not in Agent.values:
            raise Http404("No such agent.")
        if not self.can_change(request):
            raise PermissionDenied
        if request.method == "POST":
            try:
                restored = prompts.prompt_version_rollback(agent=agent, user=request.user)
            except PromptOpError as exc:
                messages.error(request, str(exc))
                return HttpResponseRedirect(admin_url(PromptVersion, "changelist"))
            messages.success(request, f"Rolled {agent} back to v{restored.version}: the next {agent} run uses it.")
            return HttpResponseRedirect(admin_url(PromptVersion, "change", restored.pk))
        active = prompts.active_version(agent)
        target = prompts.rollback_target(agent)
        context = self._context(
            request,
            f"Roll {agent} back" + (f" to v{target.version}?" if target else ""),
            agent=agent,
            active=active,
            target=target,
            diff=prompt_diff(active, target) if target is not None else None,
        )
        return TemplateResponse(request, TEMPLATES + "promptversion/rollback.html", context)


# --- The move catalog and the crisis configuration -------------------------------------------


@admin.register(EvaluationSet)
class EvaluationSetAdmin(AuditedAdmin):
    # Made from a prompt version's replay page (the runs chosen there); here renamed, noted, deleted.
    list_display = ["name", "agent", "run_count", "created_by", "created_at", "last_change"]
    list_filter = ["agent"]
    search_fields = ["name", "note"]
    fields = ["name", "agent", "note", "run_list", "created_by", "created_at"]
    readonly_fields = ["agent", "run_list", "created_by", "created_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a set is made of runs chosen on a replay page

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).annotate(run_total=Count("runs"))

    @admin.display(description="runs", ordering="run_total")
    def run_count(self, obj: EvaluationSet) -> int:
        return int(getattr(obj, "run_total", 0))

    @admin.display(description="runs")
    def run_list(self, obj: EvaluationSet) -> str:
        return ", ".join(f"#{run.pk} (turn {run.turn_id})" for run in obj.runs.order_by("pk"))


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
