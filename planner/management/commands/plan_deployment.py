"""Print the deployment plan for the current routing, or the coaching write-up's two setups."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from planner import services

ORIGINAL_SETUPS = [
    # (label, model, quantisation, GPU, count, reported full answer)
    ("Qwen3-30B-A3B on 2x RTX 4090", "qwen3-30b-a3b", "awq", "rtx-4090", 2, 40.0),
    ("Qwen3-235B-A22B on 4x A40", "qwen3-235b-a22b", "awq", "a40", 4, 108.0),
]


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--turns", type=int, default=4, help="Expected concurrent turns.")
        parser.add_argument("--original", action="store_true", help="The write-up's two setups instead.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["original"]:
            self.stdout.write(
                "| setup | decode tok/s (interval, label) | Coach first token | full answer (interval) | reported |"
            )
            self.stdout.write("| --- | --- | --- | --- | --- |")
            for label, model, quant, gpu, count, reported in ORIGINAL_SETUPS:
                plan = services.original_setup(model=model, quantisation=quant, gpu=gpu, gpus=count)
                inst = plan.instances[0]
                self.stdout.write(
                    f"| {label} | {inst.decode.point:.0f} ({inst.decode.low:.0f}-{inst.decode.high:.0f}, "
                    f"{inst.decode.label}) | {plan.coach_first_token_s:.2f} s | {plan.turn_s.point:.1f} s "
                    f"({plan.turn_s.low:.1f}-{plan.turn_s.high:.1f}) | ~{reported:.0f} s |"
                )
            return
        plan = services.plan_build(concurrent_turns=options["turns"])
        for problem in plan.problems:
            self.stderr.write(f"problem: {problem}")
        for inst in plan.instances:
            self.stdout.write(
                f"{inst.endpoint}: {inst.model} {inst.quantisation} on {inst.tp}x {inst.gpu.label}; weights "
                f"{inst.weights_gb:.1f} GB, KV {inst.kv_gb:.1f} GB, {inst.need_per_gpu_gb:.1f}/"
                f"{inst.usable_per_gpu_gb:.1f} GB per GPU; decode {inst.decode.point:.0f} tok/s "
                f"({inst.decode.low:.0f}-{inst.decode.high:.0f}, {inst.efficiency.label}); "
                f"{inst.turns_per_hour:.0f} turns/h; ${inst.cost_per_hour:.2f}/h"
            )
            self.stdout.write(f"  {inst.vllm_serve()}")
        self.stdout.write(
            f"Coach first token {plan.coach_first_token_s:.2f} s; full answer {plan.turn_s.point:.1f} s "
            f"({plan.turn_s.low:.1f}-{plan.turn_s.high:.1f}); {plan.turns_per_hour:.0f} turns/h; "
            f"${plan.cost_per_hour:.2f}/h; ${plan.cost_per_thousand_turns:.2f} per 1,000 turns"
        )
