"""The planner against figures computed by hand here (weights, KV cache, decode with its
efficiency, the critical path), on the seeded catalogue."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command

from agents.models import Agent
from planner import services
from planner.models import Gpu, Measurement, ModelCard

pytestmark = pytest.mark.django_db


def test_a_397b_model_at_4_bits_needs_at_least_190_gb() -> None:
    card = ModelCard.objects.get(name="qwen3.5-397b-a17b")
    bits = float(str(card.quantisation("awq")["bits_per_weight"]))
    # By hand: 397e9 parameters x 4.25 bits / 8 = 210.9 GB (the write-up said ~50 GB: 1 bit each).
    assert services.weights_gb(card.total_params_b, bits) == pytest.approx(397e9 * 4.25 / 8 / 1e9)
    assert services.weights_gb(card.total_params_b, 4.0) >= 190


def test_kv_cache_of_qwen3_30b_a3b_by_hand() -> None:
    card = ModelCard.objects.get(name="qwen3-30b-a3b")
    # 2 (K and V) x 48 layers x 4 KV heads x 128 dims x 2 bytes = 98,304 bytes per token.
    assert services.kv_bytes_per_token(card) == 98_304
    # 8 sequences of 4,096 tokens: 98,304 x 4,096 x 8 = 3.22 GB.
    assert services.kv_cache_gb(98_304, 4096, 8) == pytest.approx(3.2212, abs=1e-3)


def test_30b_a3b_on_one_a100_80gb_predicts_about_104_tokens_per_s_from_the_calibrated_class() -> None:
    Measurement.objects.all().delete()  # the class's calibrated efficiency, not the recorded run
    card = ModelCard.objects.get(name="qwen3-30b-a3b")
    gpu = Gpu.objects.get(name="a100-80gb")
    inst = services.instance_plan(
        endpoint="e", served_name="m", agents=[Agent.SHADOW], model=card, quantisation="bf16", gpu=gpu,
        tp=None, concurrent_turns=1, tokens_per_sequence=4096,
    )  # fmt: skip
    # Roofline by hand: 3.3e9 active x 2 bytes = 6.6 GB per token; 2,039 GB/s / 6.6 GB = 308.9.
    assert inst.roofline == pytest.approx(2039 / 6.6, rel=1e-6)
    assert inst.tp == 1  # 61 GB of weights + 0.4 GB KV fit one 80 GB GPU
    assert inst.efficiency.label == "calibrated"
    assert inst.decode.point == pytest.approx(104, rel=0.25)
    assert inst.decode.point != pytest.approx(309, rel=0.25)
    assert inst.decode.point != pytest.approx(168, rel=0.25)
    assert inst.decode.low <= inst.decode.point <= inst.decode.high


def test_a_recorded_run_replaces_the_calibrated_efficiency() -> None:
    card = ModelCard.objects.get(name="qwen3-30b-a3b")
    gpu = Gpu.objects.get(name="a100-80gb")
    inst = services.instance_plan(
        endpoint="e", served_name="m", agents=[Agent.SHADOW], model=card, quantisation="bf16", gpu=gpu,
        tp=1, concurrent_turns=1, tokens_per_sequence=4096,
    )  # fmt: skip
    assert inst.efficiency.label == "measured"
    assert (inst.decode.low, inst.decode.high) == pytest.approx((100, 108))


def test_the_cpu_build_here_is_a_measured_row() -> None:
    card = ModelCard.objects.get(name="smollm2-135m")
    gpu = Gpu.objects.get(name="cpu-vllm-here")
    inst = services.instance_plan(
        endpoint="e", served_name="m", agents=list(services.DEFAULT_PROFILE), model=card, quantisation="bf16",
        gpu=gpu, tp=1, concurrent_turns=1, tokens_per_sequence=4096,
    )  # fmt: skip
    assert inst.decode.label == "measured"
    assert (inst.decode.low, inst.decode.high) == pytest.approx((26, 28))
    assert inst.prefill_s(600) == pytest.approx(1.0)


def test_the_critical_path_is_shadow_plus_slowest_specialist_plus_synth_plus_critic() -> None:
    seconds = {"coach": 99.0, "shadow": 4.0, "persona": 6.0, "plasticity": 9.0, "stability": 3.0, "synth": 5.0}
    assert services.critical_path_s({**seconds, "critic": 1.5}) == 4.0 + 9.0 + 5.0 + 1.5


def test_a_235b_model_too_large_for_one_a40_gets_tensor_parallelism() -> None:
    card = ModelCard.objects.get(name="qwen3-235b-a22b")
    gpu = Gpu.objects.get(name="a40")
    inst = services.instance_plan(
        endpoint="e", served_name="m", agents=[Agent.SHADOW], model=card, quantisation="awq", gpu=gpu,
        tp=None, concurrent_turns=1, tokens_per_sequence=8192,
    )  # fmt: skip
    # 235e9 x 4.25 / 8 = 124.8 GB; an A40 holds 48 x 0.9 - 2 = 41.2 GB: 4 GPUs (31.2 GB + KV each).
    assert inst.weights_gb == pytest.approx(124.84, abs=0.01)
    assert inst.tp == 4
    assert inst.fits
    line = inst.vllm_serve()
    assert "--tensor-parallel-size 4" in line
    assert "--quantization awq_marlin" in line
    assert "--enable-prefix-caching" in line


def test_the_original_setups_turn_and_the_commands_table(capsys: pytest.CaptureFixture[str]) -> None:
    small = services.original_setup(model="qwen3-30b-a3b", quantisation="awq", gpu="rtx-4090", gpus=2)
    large = services.original_setup(model="qwen3-235b-a22b", quantisation="awq", gpu="a40", gpus=4)
    # By hand for the large one: roofline 4 x 696 GB/s / (22e9 x 4.25 / 8 bytes + KV) ~= 238;
    # x 0.10 (calibrated MoE TP4) ~= 24 tokens/s; the critical path writes 350 + 450 + 500 +
    # 120 = 1,420 tokens of the default profile: ~60 s plus prefill.
    assert large.instances[0].decode.point == pytest.approx(4 * 696 / (22 * 4.25 / 8) * 0.10, rel=0.05)
    tokens = sum(services.DEFAULT_PROFILE[a].completion for a in ("shadow", "persona", "synth", "critic"))
    assert large.turn_s.point == pytest.approx(tokens / large.instances[0].decode.point, rel=0.15)
    assert small.turn_s.point < large.turn_s.point
    call_command("plan_deployment", "--original")
    out = capsys.readouterr().out
    assert "~40 s" in out
    assert "~108 s" in out


def test_the_plan_page_draws_the_topology_beside_the_numbers(admin_client: Any) -> None:
    from agents.models import ModelEndpoint
    from planner.models import Placement

    endpoint = ModelEndpoint.objects.get(name="embedded")
    Placement.objects.create(
        endpoint=endpoint,
        model=ModelCard.objects.get(name="smollm2-135m"),
        gpu=Gpu.objects.get(name="cpu-vllm-here"),
        tensor_parallel=1,
    )
    response = admin_client.get("/admin/planner/placement/plan/?turns=2")
    assert response.status_code == 200
    page = response.content.decode()
    assert '<svg id="topology"' in page
    assert "vllm serve HuggingFaceTB/SmolLM2-135M-Instruct" in page
    assert "measured" in page
