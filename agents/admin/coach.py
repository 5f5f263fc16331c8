"""Admin for coaches: the review pages. Sessions with a session's review, the coachees and a
coachee's overview; turns with the review queue. Reads come from agents/review/, writes go through
agents/review/annotations.py; the other records coaches browse are in coach_records.py."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from agents import selectors
from agents.admin.coach_records import (
    AgentRunInline,
    AnnotationInline,
    ConflictInline,
    MessageInline,
    annotation_says_something,
    request_user_id,
)
from agents.admin.scoping import CoacheeScopedMixin, coachee_filter, scope_for, scoped_coachees
from agents.models import Annotation, BlackboardVersion, CoachInboxMark, CoachingSession, Escalation, Turn
from agents.review import labels
from agents.review.annotations import (
    AlreadyLatestError,
    DismissalRefusedError,
    alarm_dismiss,
    alarm_name,
    annotation_add,
    inbox_mark_seen,
    turns_flag,
)
from agents.review.export import session_export_rows, turn_export_rows
from agents.review.overview import coachee_overview, coachee_rows
from agents.review.queue import QUEUE_REASONS, flagged_summaries, inbox, queue_rows, review_queue
from agents.review.session import session_review
from agents.turns import sessions

QUEUE_PAGE = 50


def _csv_response(filename: str, rows: Iterable[list[str]]) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    for row in rows:
        writer.writerow(row)
    return response


def _review_url(session_id: int, turn_id: int | None = None) -> str:
    url = reverse("admin:agents_coachingsession_review", args=[session_id])
    return f"{url}?turn={turn_id}#turn-{turn_id}" if turn_id else url


def _overview_url(coachee_id: int) -> str:
    return reverse("admin:agents_coachingsession_coachee", args=[coachee_id])


# --- Shared actions ---------------------------------------------------------------------


class ExportCsvMixin(CoacheeScopedMixin):
    """'Export selected as CSV': the selection, scoped again, through an export function."""

    export_rows: Callable[[QuerySet[Any]], Iterable[list[str]]]

    @admin.action(description="Export selected as CSV", permissions=["view"])
    def export_csv(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse:
        rows = type(self).export_rows(self.scoped(request, queryset))
        return _csv_response(f"{self.opts.model_name}-export.csv", rows)


# --- Sessions, with the review pages ------------------------------------------------------


class AnnotationReviewForm(forms.Form):
    rating = forms.TypedChoiceField(
        choices=[("", "No rating"), *[(str(i), f"{i} of 5") for i in range(1, 6)]],
        coerce=int,
        empty_value=None,
        required=False,
        label="Rate the full answer",
    )
    flagged = forms.BooleanField(required=False, label="Flag this turn for review")
    note = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), label="Note")

    def clean(self) -> dict[str, Any]:
        return annotation_says_something(super().clean() or {})


@admin.register(CoachingSession)
class CoachingSessionAdmin(ExportCsvMixin, admin.ModelAdmin):
    coachee_path = "coachee"
    list_display = ["id", "coachee_link", "status", "turn_count", "created_at", "ended_at", "review_link"]
    list_display_links = ["id"]
    list_filter = ["status", coachee_filter("coachee")]
    list_select_related = ["coachee"]
    search_fields = ["=id", "coachee__username"]
    date_hierarchy = "created_at"
    inlines = [MessageInline]
    readonly_fields = ["last_seq"]
    actions = ["export_csv"]
    export_rows = staticmethod(session_export_rows)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # Explicit order: a GROUP BY query drops Meta.ordering, and autocomplete paginates this.
        counted = super().get_queryset(request).annotate(turn_total=Count("turns", distinct=True))
        return counted.order_by("-created_at", "-pk")

    @admin.display(description="coachee", ordering="coachee__username")
    def coachee_link(self, obj: CoachingSession) -> str:
        return format_html('<a href="{}">{}</a>', _overview_url(obj.coachee_id), obj.coachee.get_username())

    @admin.display(description="turns", ordering="turn_total")
    def turn_count(self, obj: CoachingSession) -> int:
        return int(getattr(obj, "turn_total", 0))

    @admin.display(description="review")
    def review_link(self, obj: CoachingSession) -> str:
        return format_html('<a class="button" href="{}">Review</a>', _review_url(obj.pk))

    # The review pages ------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path("coachees/", wrap(self.coachees_view), name="agents_coachingsession_coachees"),
            path("coachees/seen/", wrap(self.inbox_seen_view), name="agents_coachingsession_inbox_seen"),
            path("coachees/<int:coachee_id>/", wrap(self.coachee_view), name="agents_coachingsession_coachee"),
            path(
                "coachees/<int:coachee_id>/blackboard/<int:version_id>/revert/",
                wrap(require_POST(self.revert_view)),
                name="agents_coachingsession_revert",
            ),
            path("<path:object_id>/review/", wrap(self.review_view), name="agents_coachingsession_review"),
            path(
                "<path:object_id>/review/turns/<int:turn_id>/annotate/",
                wrap(require_POST(self.annotate_view)),
                name="agents_coachingsession_annotate",
            ),
            path(
                "<path:object_id>/review/turns/<int:turn_id>/crisis-dismiss/",
                wrap(require_POST(self.crisis_dismiss_view)),
                name="agents_coachingsession_crisis_dismiss",
            ),
            *super().get_urls(),
        ]

    def _page(self, request: HttpRequest, template: str, title: str, **context: Any) -> TemplateResponse:
        return TemplateResponse(
            request,
            f"admin/agents/review/{template}",
            {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "title": title,
                "queue_url": reverse("admin:agents_turn_review_queue"),
                "coachees_url": reverse("admin:agents_coachingsession_coachees"),
                **context,
            },
        )

    def _related_admin(self, model: type[Any]) -> Any:
        return self.admin_site.get_model_admin(model)

    def _can_annotate(self, request: HttpRequest) -> bool:
        return bool(self._related_admin(Annotation).has_add_permission(request))

    def _can_revert(self, request: HttpRequest) -> bool:
        return bool(self._related_admin(BlackboardVersion).has_revert_permission(request))

    def _session_or_404(self, request: HttpRequest, object_id: str) -> CoachingSession:
        session = self.get_object(request, object_id)
        if session is None or not self.has_view_permission(request, session):
            raise Http404("No such session.")
        return session

    def review_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        session = self._session_or_404(request, object_id)
        open_turn = request.GET.get("turn", "")
        data = session_review(session, open_turn_id=int(open_turn) if open_turn.isdigit() else None)
        return self._page(
            request,
            "session.html",
            f"{session.coachee.get_username()}'s session of {timezone.localtime(session.created_at):%-d %b %Y, %H:%M}",
            review=data,
            session=session,
            can_annotate=self._can_annotate(request),
            annotation_form=AnnotationReviewForm(),
            overview_url=_overview_url(session.coachee_id),
            change_url=reverse("admin:agents_coachingsession_change", args=[session.pk]),
        )

    def _turn_or_404(self, request: HttpRequest, session: CoachingSession, turn_id: int) -> Turn:
        turn = self._related_admin(Turn).get_queryset(request).filter(session=session, pk=turn_id).first()
        if turn is None:
            raise Http404("No such turn.")
        return turn

    def annotate_view(self, request: HttpRequest, object_id: str, turn_id: int) -> HttpResponse:
        session = self._session_or_404(request, object_id)
        turn = self._turn_or_404(request, session, turn_id)
        if not self._can_annotate(request):
            raise PermissionDenied
        form = AnnotationReviewForm(request.POST)
        if form.is_valid():
            annotation = annotation_add(
                turn_id=turn.pk,
                author_id=request_user_id(request),
                rating=form.cleaned_data["rating"],
                flagged=form.cleaned_data["flagged"],
                note=form.cleaned_data["note"],
            )
            self._related_admin(Annotation).log_addition(request, annotation, [{"added": {}}])
            messages.success(request, f"Your annotation on turn {turn.pk} is saved.")
        else:
            messages.error(request, " ".join(str(e) for errors in form.errors.values() for e in errors))
        return HttpResponseRedirect(_review_url(session.pk, turn.pk))

    def crisis_dismiss_view(self, request: HttpRequest, object_id: str, turn_id: int) -> HttpResponse:
        """A coach who may annotate the turn finds its alarm false (a crisis card or an escalation)."""
        session = self._session_or_404(request, object_id)
        turn = self._turn_or_404(request, session, turn_id)
        if not self._can_annotate(request):
            raise PermissionDenied
        try:
            turn = alarm_dismiss(
                turn_id=turn.pk, author_id=request_user_id(request), note=request.POST.get("note", "")[:500]
            )
        except DismissalRefusedError as refused:
            messages.error(request, str(refused))
        else:
            self._related_admin(Turn).log_change(request, turn, f"Found its {alarm_name(turn)} a false alarm.")
            messages.success(request, f"Turn {turn.pk}'s {alarm_name(turn)} is marked a false alarm.")
        return HttpResponseRedirect(_review_url(session.pk, turn.pk))

    def coachees_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        coachees = scoped_coachees(request)
        if scope_for(request).everything:
            coachees = coachees.filter(coaching_sessions__isnull=False).distinct()
        queue = review_queue(self._related_admin(Turn).get_queryset(request))
        query = request.GET.get("q", "").strip()
        # Searched within the sessions this reader may see (the same scope as every coach page).
        readable = selectors.with_first_words(CoachingSession.objects.filter(coachee__in=scoped_coachees(request)))
        turns = self._related_admin(Turn).get_queryset(request)
        mark = CoachInboxMark.objects.filter(coach_id=request.user.pk).first()
        return self._page(
            request,
            "coachees.html",
            "Your coachees",
            rows=coachee_rows(coachees, queue),
            inbox=inbox(turns, queue, mark.seen_at if mark else None),
            drawn_at=timezone.now().isoformat(),
            query=query,
            hits=sessions.transcript_search(sessions=readable, query=query) if query else None,
        )

    def inbox_seen_view(self, request: HttpRequest) -> HttpResponse:
        coach_id = request.user.pk
        if request.method != "POST" or coach_id is None or not self.has_view_permission(request):
            raise PermissionDenied
        try:
            drawn_at = parse_datetime(request.POST.get("drawn_at", ""))
        except ValueError:  # well formed but no real moment: mark up to now
            drawn_at = None
        if drawn_at is None or drawn_at > timezone.now():
            drawn_at = timezone.now()
        inbox_mark_seen(coach_id=coach_id, seen_at=drawn_at)
        return HttpResponseRedirect(reverse("admin:agents_coachingsession_coachees"))

    def coachee_view(self, request: HttpRequest, coachee_id: int) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        coachee = scoped_coachees(request).filter(pk=coachee_id).first()
        if coachee is None:
            raise Http404("No such coachee.")
        return self._page(
            request,
            "coachee.html",
            f"Coachee {coachee.get_username()}",
            overview=coachee_overview(coachee),
            coachee=coachee,
            can_revert=self._can_revert(request),
        )

    def revert_view(self, request: HttpRequest, coachee_id: int, version_id: int) -> HttpResponse:
        blackboard_admin = self._related_admin(BlackboardVersion)
        version = blackboard_admin.get_queryset(request).filter(pk=version_id, coachee_id=coachee_id).first()
        if version is None:
            raise Http404("No such blackboard version.")
        if not self._can_revert(request):
            raise PermissionDenied
        try:
            new = blackboard_admin.revert(request, version)
        except AlreadyLatestError as exc:
            messages.warning(request, str(exc))
        else:
            messages.success(request, f"Reverted: v{new.version} is a copy of v{version.version}. Nothing was deleted.")
        return HttpResponseRedirect(_overview_url(coachee_id) + "#blackboard")


# --- Turns, with the review queue -------------------------------------------------------


class CrisisCardFilter(admin.SimpleListFilter):
    """Turns the crisis pre-gate answered with the card, standing, or whose card or escalation a
    coach found a false alarm (review.annotations.alarm_dismiss): the false alarms of real use,
    in one list."""

    title = "crisis card"
    parameter_name = "crisis_card"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("standing", "standing"), ("false_alarm", "found a false alarm")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "standing":
            return queryset.filter(crisis_signal__isnull=False, crisis_dismissed_at__isnull=True)
        if self.value() == "false_alarm":
            return queryset.filter(crisis_dismissed_at__isnull=False)
        return queryset


@admin.register(Turn)
class TurnAdmin(ExportCsvMixin, admin.ModelAdmin):
    coachee_path = "session__coachee"
    list_display = [
        "id",
        "coachee",
        "session_no",
        "turn_in_session",
        "first_words",
        "status",
        "needs_review",
        "started_at",
        "review_link",
    ]
    list_filter = ["status", "escalation", CrisisCardFilter, "degraded", "flagged", coachee_filter("session__coachee")]
    list_select_related = ["session__coachee", "user_message"]
    search_fields = ["=id", "user_message__text", "session__coachee__username", "flag_reason"]
    date_hierarchy = "started_at"
    ordering = ["-started_at", "-pk"]
    inlines = [AgentRunInline, ConflictInline, AnnotationInline]
    readonly_fields = ["user_message", "coach_message", "synth_message", "brief", "critic_result", "context_blackboard"]
    actions = ["export_csv", "flag_for_review"]
    export_rows = staticmethod(turn_export_rows)

    @admin.display(description="coachee", ordering="session__coachee__username")
    def coachee(self, obj: Turn) -> str:
        return obj.session.coachee.get_username()

    @admin.display(description="session", ordering="session_id")
    def session_no(self, obj: Turn) -> int:
        return int(obj.session_id)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).annotate(session_turn_number=selectors.turn_number())

    @admin.display(description="turn", ordering="started_at")
    def turn_in_session(self, obj: Turn) -> int | None:
        """The number a person reads on the session review, not the database id."""
        return getattr(obj, "session_turn_number", None)

    @admin.display(description="coachee's message")
    def first_words(self, obj: Turn) -> str:
        return labels.excerpt(obj.user_message.text, 60)

    @admin.display(description="needs review")
    def needs_review(self, obj: Turn) -> str:
        reasons = [f"escalation: {obj.get_escalation_display().lower()}"] if obj.escalation != Escalation.NONE else []
        if obj.crisis_dismissed_at is not None:
            reasons.append(f"{alarm_name(obj)} found a false alarm")
        reasons += [label for label, on in (("degraded", obj.degraded), ("flagged", obj.flagged)) if on]
        return ", ".join(reasons) or "-"

    @admin.display(description="review")
    def review_link(self, obj: Turn) -> str:
        return format_html('<a href="{}">Review</a>', _review_url(obj.session_id, obj.pk))

    def has_annotate_permission(self, request: HttpRequest) -> bool:
        return bool(self.admin_site.get_model_admin(Annotation).has_add_permission(request))

    @admin.action(description="Flag selected turns for review", permissions=["annotate"])
    def flag_for_review(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        ids = list(self.scoped(request, queryset).values_list("pk", flat=True))
        flagged = turns_flag(turn_ids=ids, author_id=request_user_id(request), note="Flagged from the list")
        self.message_user(request, f"Flagged {flagged} turn(s) for review.", messages.SUCCESS)

    def get_urls(self) -> list[URLPattern]:
        return [
            path("review-queue/", self.admin_site.admin_view(self.queue_view), name="agents_turn_review_queue"),
            *super().get_urls(),
        ]

    def queue_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        reason = request.GET.get("reason", "")
        reason = reason if reason in QUEUE_REASONS else ""
        queue = review_queue(self.get_queryset(request), reason or None)
        page = Paginator(queue, QUEUE_PAGE).get_page(request.GET.get("page"))
        return TemplateResponse(
            request,
            "admin/agents/review/queue.html",
            {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "title": "Review queue",
                "page": page,
                "rows": queue_rows(page.object_list),
                "reason": reason,
                "reasons": QUEUE_REASONS,
                "coachees_url": reverse("admin:agents_coachingsession_coachees"),
                # Session summaries that failed their check with every strategy: not used in
                # any prompt until a coach looks (the builder shows a transcript excerpt instead).
                "flagged_summaries": flagged_summaries(scoped_coachees(request).values("pk")),
            },
        )
