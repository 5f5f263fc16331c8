"""Admin for coaches: the records behind the review pages (messages, agent runs, conflicts, the
blackboard, annotations) and the inlines the sessions and turns pages show, each scoped to the
coachees assigned to the coach (agents/admin/scoping.py). Apart from coach.py, the review pages."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponseBase

from agents.admin.scoping import CoacheeScopedInlineMixin, CoacheeScopedMixin, coachee_filter, scope_for
from agents.admin.widgets import SafeAutocompleteMixin
from agents.models import AgentRun, Annotation, BlackboardVersion, Conflict, Message
from agents.review import labels
from agents.review.annotations import AlreadyLatestError, blackboard_revert


def request_user_id(request: HttpRequest) -> int:
    """The logged-in user's id (admin views only run for logged-in staff)."""
    user_id = request.user.pk
    if user_id is None:
        raise PermissionDenied
    return int(user_id)


# --- Inlines ----------------------------------------------------------------------------


class MessageInline(CoacheeScopedInlineMixin, admin.TabularInline):
    model = Message
    coachee_path = "session__coachee"
    parent_coachee_path = "coachee"
    fields = readonly_fields = ("seq", "role", "status", "text", "created_at")
    extra = 0
    can_delete = False


class AgentRunInline(CoacheeScopedInlineMixin, admin.TabularInline):
    model = AgentRun
    coachee_path = "turn__session__coachee"
    parent_coachee_path = "session__coachee"
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
    show_change_link = True


class ConflictInline(CoacheeScopedInlineMixin, admin.TabularInline):
    model = Conflict
    coachee_path = "turn__session__coachee"
    parent_coachee_path = "session__coachee"
    fields = readonly_fields = ("rule", "left_agent", "left_claim", "right_agent", "right_claim", "resolution")
    extra = 0
    can_delete = False


class AnnotationInline(CoacheeScopedInlineMixin, admin.TabularInline):
    model = Annotation
    coachee_path = "turn__session__coachee"
    parent_coachee_path = "session__coachee"
    fields = readonly_fields = ("author", "rating", "flagged", "note", "created_at")
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # annotations are written on the review page or in Annotations


# --- Messages -----------------------------------------------------------------------------


@admin.register(Message)
class MessageAdmin(CoacheeScopedMixin, admin.ModelAdmin):
    coachee_path = "session__coachee"
    list_display = ["id", "session", "seq", "role", "status", "excerpt", "created_at"]
    list_filter = ["role", "status", coachee_filter("session__coachee")]
    list_select_related = ["session__coachee"]
    search_fields = ["text"]
    readonly_fields = ["session", "seq", "role", "text", "status", "client_id", "created_at", "updated_at"]

    @admin.display(description="text")
    def excerpt(self, obj: Message) -> str:
        return labels.excerpt(obj.text, 100)


# --- Agent runs, conflicts ----------------------------------------------------------------


@admin.register(AgentRun)
class AgentRunAdmin(CoacheeScopedMixin, admin.ModelAdmin):
    coachee_path = "turn__session__coachee"
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
    list_filter = ["agent", "status", coachee_filter("turn__session__coachee")]
    list_select_related = ["turn"]
    search_fields = ["=id", "error"]
    exclude = ["prompt_values", "extra_instructions", "enums"]


@admin.register(Conflict)
class ConflictAdmin(CoacheeScopedMixin, admin.ModelAdmin):
    coachee_path = "turn__session__coachee"
    list_display = ["turn", "rule", "left_agent", "right_agent", "resolution", "created_at"]
    list_filter = ["rule", coachee_filter("turn__session__coachee")]
    list_select_related = ["turn"]
    search_fields = ["rule", "resolution"]


# --- The blackboard ---------------------------------------------------------------------


@admin.register(BlackboardVersion)
class BlackboardVersionAdmin(CoacheeScopedMixin, admin.ModelAdmin):
    coachee_path = "coachee"
    list_display = ["coachee", "version", "source_turn", "source_agent", "edited_by", "created_at"]
    list_filter = ["source_agent", coachee_filter("coachee")]
    list_select_related = ["coachee", "edited_by", "source_turn"]
    search_fields = ["coachee__username", "=version"]
    actions = ["revert_to_version"]

    def has_revert_permission(self, request: HttpRequest) -> bool:
        """Coaches (and superusers) who may view the blackboard may revert it; which
        versions, the scope decides."""
        scope = scope_for(request)
        return (scope.everything or scope.is_coach) and self.has_view_permission(request)

    def revert(self, request: HttpRequest, version: BlackboardVersion) -> BlackboardVersion:
        new = blackboard_revert(
            coachee_id=version.coachee_id, version_id=version.pk, by_user_id=request_user_id(request)
        )
        self.log_addition(request, new, [{"added": {"name": f"revert to v{version.version}", "object": str(new)}}])
        return new

    @admin.action(description="Revert the blackboard to the selected version", permissions=["revert"])
    def revert_to_version(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponseBase | None:
        selected = list(self.scoped(request, queryset)[:2])
        if len(selected) != 1:
            self.message_user(request, "Select exactly one version to revert to.", messages.WARNING)
            return None
        try:
            new = self.revert(request, selected[0])
        except AlreadyLatestError as exc:
            self.message_user(request, str(exc), messages.WARNING)
            return None
        self.message_user(
            request, f"Reverted: v{new.version} is a copy of v{selected[0].version}. Nothing was deleted."
        )
        return None


# --- Annotations ------------------------------------------------------------------------


def annotation_says_something(data: dict[str, Any]) -> dict[str, Any]:
    """Both annotation forms refuse an empty annotation the same way."""
    if data.get("rating") is None and not data.get("flagged") and not (data.get("note") or "").strip():
        raise forms.ValidationError("Give a rating, flag the turn or write a note.")
    return data


class AnnotationAdminForm(forms.ModelForm):
    class Meta:
        model = Annotation
        fields = ["turn", "rating", "flagged", "note"]

    def clean(self) -> dict[str, Any]:
        return annotation_says_something(super().clean() or {})


@admin.register(Annotation)
class AnnotationAdmin(SafeAutocompleteMixin, CoacheeScopedMixin, admin.ModelAdmin):
    coachee_path = "turn__session__coachee"
    form = AnnotationAdminForm
    list_display = ["turn", "coachee", "author", "rating", "flagged", "note_excerpt", "created_at"]
    list_filter = ["flagged", "rating", coachee_filter("turn__session__coachee")]
    list_select_related = ["turn__session__coachee", "author"]
    search_fields = ["note"]
    autocomplete_fields = ["turn"]
    readonly_fields = ["author", "created_at"]

    @admin.display(description="coachee", ordering="turn__session__coachee__username")
    def coachee(self, obj: Annotation) -> str:
        return obj.turn.session.coachee.get_username()

    @admin.display(description="note")
    def note_excerpt(self, obj: Annotation) -> str:
        return labels.excerpt(obj.note, 80)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A coach edits their own annotations; others' they can read.
        allowed = super().has_change_permission(request, obj)
        if obj is None or not allowed or request.user.is_superuser:
            return allowed
        return bool(obj.author_id == request.user.pk)

    def save_model(self, request: HttpRequest, obj: Annotation, form: Any, change: bool) -> None:
        if not change:
            obj.author_id = request.user.pk
        super().save_model(request, obj, form, change)
