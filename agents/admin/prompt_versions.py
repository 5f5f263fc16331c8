"""Admin for operators' prompt work: prompt versions and the pages around them (new draft, edit as
a new draft, diff, replay on past runs, activate, rollback), and the evaluation sets made on the
replay page. Thin views; the work is in agents/operations/.

Prompt versions are immutable: "Edit as new draft" makes a new draft, which can be compared
with the active version, replayed on past runs of its agent (nothing stored changes), then
activated; the previous version can be restored with a rollback. Every change, and every
replay, is in Django's LogEntry.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from agents import selectors
from agents.admin.forms import DraftForm
from agents.admin.operator import TEMPLATES, AuditedAdmin, admin_url
from agents.memory import predictions
from agents.models import Agent, AgentConfig, EvaluationSet, PromptStatus, PromptVersion, ReplayJob
from agents.operations import evaluation, prompts, replay
from agents.operations.diff import prompt_diff
from agents.operations.errors import PromptOpError
from agents.prompts import PLACEHOLDERS, placeholders_in


@admin.register(PromptVersion)
class PromptVersionAdmin(AuditedAdmin):
    list_display = ["title", "status_badge", "created", "activated", "coachee_feedback", "links"]
    list_display_links = ["title"]
    # Explicit: the feedback counts (get_queryset) make it a GROUP BY query, where Django drops
    # Meta.ordering, and the autocomplete view paginates it unordered.
    ordering = ["agent", "-version"]
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
