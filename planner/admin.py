"""Admin: the catalogue as editable rows, each endpoint's placement, and the plan page
(numbers beside a drawing of agents → endpoints → GPUs). Declarations and one thin view."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import URLPattern, path

from agents.models import AgentConfig
from planner import services
from planner.models import Efficiency, Gpu, Measurement, ModelCard, Placement


@admin.register(Gpu)
class GpuAdmin(admin.ModelAdmin):
    list_display = ["label", "memory_gb", "bandwidth_gbs", "bf16_tflops", "fp8_tflops", "interconnect", "hourly_usd"]
    list_editable = ["hourly_usd"]
    search_fields = ["name", "label"]


@admin.register(ModelCard)
class ModelCardAdmin(admin.ModelAdmin):
    """The sortable matrix: each model's size, class, licence, its benchmarks and the roles
    (agents) whose endpoint runs it."""

    list_display = ["name", "total_params_b", "active_params_b", "moe", "context_length", "licence", "scores", "roles"]
    list_filter = ["moe", "family", "licence"]
    search_fields = ["name", "hf_id"]

    @admin.display(description="Benchmarks")
    def scores(self, obj: ModelCard) -> str:
        return ", ".join(f"{b['name']} {b['score']}" for b in obj.benchmarks) or "-"

    @admin.display(description="Roles")
    def roles(self, obj: ModelCard) -> str:
        endpoints = Placement.objects.filter(model=obj).values_list("endpoint_id", flat=True)
        agents = AgentConfig.objects.filter(endpoint_id__in=list(endpoints)).values_list("agent", flat=True)
        return ", ".join(sorted(agents)) or "-"


@admin.register(Measurement)
class MeasurementAdmin(admin.ModelAdmin):
    list_display = ["model", "gpu", "tensor_parallel", "quantisation", "decode_low", "decode_high", "engine", "source"]


@admin.register(Efficiency)
class EfficiencyAdmin(admin.ModelAdmin):
    list_display = ["__str__", "point", "label", "source"]


@admin.register(Placement)
class PlacementAdmin(admin.ModelAdmin):
    list_display = ["endpoint", "model", "quantisation", "gpu", "tensor_parallel"]
    change_list_template = "admin/planner/placement_changelist.html"

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self.plan_view)
        return [path("plan/", view, name="planner_plan"), *super().get_urls()]

    def plan_view(self, request: HttpRequest) -> TemplateResponse:
        if not self.has_view_permission(request):
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied
        try:
            turns = max(1, min(1000, int(request.GET.get("turns", "4"))))
        except ValueError:
            turns = 4
        plan = services.plan_build(concurrent_turns=turns)
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "title": "Deployment plan",
            "plan": plan,
            "turns": turns,
            "drawing": services_drawing(plan),
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/planner/plan.html", context)


def services_drawing(plan: services.Plan) -> dict[str, Any]:
    """Positions for the SVG: agents (left) → endpoints (middle) → GPUs (right)."""
    row = 34
    agents = sorted(plan.stages)
    endpoints = [i.endpoint for i in plan.instances]
    gpus = plan.gpus
    height = max(len(agents), len(endpoints), len(gpus), 1) * row + 20
    a_pos = {a: 20 + i * row for i, a in enumerate(agents)}
    e_pos = {e: 20 + i * row for i, e in enumerate(endpoints)}
    g_pos = {g["index"]: 20 + i * row for i, g in enumerate(gpus)}
    agent_lines = [(a_pos[a], e_pos[s.endpoint]) for a, s in plan.stages.items() if s.endpoint in e_pos]
    gpu_lines = [(e_pos[e], g_pos[g["index"]]) for g in gpus for e in g["instances"] if e in e_pos]
    return {
        "height": height,
        "agents": list(a_pos.items()),
        "endpoints": list(e_pos.items()),
        "gpus": [(f"GPU {g['index']}: {g['label']}", g_pos[g["index"]]) for g in gpus],
        "agent_lines": agent_lines,
        "gpu_lines": gpu_lines,
    }
