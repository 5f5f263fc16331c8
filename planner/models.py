"""The catalogue (models, GPUs, recorded decode runs) and where each endpoint's model runs.

Seeded from planner/data/catalogue.toml by migration 0002 (never overwriting an edited row);
every figure carries its source. No computation here: services.py plans.
"""

from __future__ import annotations

from django.db import models

from agents.models import ModelEndpoint


class Gpu(models.Model):
    name = models.SlugField(max_length=40, unique=True)
    label = models.CharField(max_length=80)
    memory_gb = models.FloatField(help_text="Device memory, GB (10^9 bytes).")
    bandwidth_gbs = models.FloatField(help_text="Memory bandwidth, GB/s (vendor figure).")
    bf16_tflops = models.FloatField(help_text="Dense BF16 tensor throughput, TFLOPS (no sparsity).")
    fp8_tflops = models.FloatField(null=True, blank=True, help_text="Dense FP8 throughput; empty: no FP8 units.")
    interconnect = models.CharField(max_length=120)
    interconnect_gbs = models.FloatField(help_text="GPU-to-GPU bandwidth per direction, GB/s.")
    hourly_usd = models.FloatField(help_text="Rental price per GPU hour; edit to your provider's.")
    measured = models.BooleanField(default=False, help_text="Figures measured here rather than a vendor's.")
    source = models.CharField(max_length=300)
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["memory_gb", "name"]
        verbose_name = "GPU"

    def __str__(self) -> str:
        return self.label


class ModelCard(models.Model):
    name = models.SlugField(max_length=80, unique=True)
    hf_id = models.CharField(max_length=200, help_text="Hugging Face repository `vllm serve` loads.")
    family = models.CharField(max_length=40, blank=True)
    moe = models.BooleanField(default=False, help_text="Mixture of experts: decode reads the active parameters.")
    total_params_b = models.FloatField(help_text="Total parameters, billions (all live in memory).")
    active_params_b = models.FloatField(help_text="Parameters read per token, billions (= total for dense).")
    layers = models.PositiveIntegerField(null=True, blank=True)
    kv_heads = models.PositiveIntegerField(null=True, blank=True)
    head_dim = models.PositiveIntegerField(null=True, blank=True)
    kv_bytes_per_token = models.PositiveIntegerField(
        null=True, blank=True, help_text="Override for attention that is not plain GQA (MLA, hybrid)."
    )
    context_length = models.PositiveIntegerField()
    licence = models.CharField(max_length=60)
    # [{"name": "awq", "bits_per_weight": 4.25, "vllm_args": "...", "checkpoint": "...", "source": "..."}]
    quantisations = models.JSONField(default=list)
    # [{"name": "IFEval", "score": 88.7, "source": "..."}]
    benchmarks = models.JSONField(default=list, blank=True)
    source = models.CharField(max_length=300)
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["family", "total_params_b"]
        verbose_name = "model"

    def __str__(self) -> str:
        return self.name

    def quantisation(self, name: str) -> dict[str, object]:
        for quant in self.quantisations:
            if quant.get("name") == name:
                return dict(quant)
        raise KeyError(f"{self.name} has no quantisation {name!r}")


class Measurement(models.Model):
    """A recorded decode run: where one exists for a model, GPU and TP degree, its efficiency
    replaces the calibrated one for that combination."""

    model = models.ForeignKey(ModelCard, on_delete=models.CASCADE, related_name="measurements")
    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="measurements")
    tensor_parallel = models.PositiveSmallIntegerField(default=1)
    quantisation = models.CharField(max_length=20)
    decode_low = models.FloatField(help_text="Tokens/s per stream, batch 1 (lowest seen).")
    decode_high = models.FloatField(help_text="Tokens/s per stream, batch 1 (highest seen).")
    prefill_tokens_per_s = models.FloatField(null=True, blank=True)
    engine = models.CharField(max_length=40, default="vLLM")
    source = models.CharField(max_length=300)

    class Meta:
        ordering = ["model", "gpu", "tensor_parallel"]

    def __str__(self) -> str:
        return f"{self.model} on {self.tensor_parallel}x {self.gpu}: {self.decode_low:g}-{self.decode_high:g} tok/s"


class Placement(models.Model):
    """Where an endpoint's model runs: one vLLM instance of this model on these GPUs."""

    endpoint = models.OneToOneField(ModelEndpoint, on_delete=models.CASCADE, related_name="placement")
    model = models.ForeignKey(ModelCard, on_delete=models.PROTECT)
    quantisation = models.CharField(max_length=20, default="bf16")
    gpu = models.ForeignKey(Gpu, on_delete=models.PROTECT)
    tensor_parallel = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Empty: the least of 1, 2, 4, 8 GPUs that holds weights and KV cache."
    )
    gpu_memory_utilization = models.FloatField(default=0.9)
    port = models.PositiveIntegerField(default=8000)

    class Meta:
        ordering = ["endpoint__name"]

    def __str__(self) -> str:
        return f"{self.endpoint} → {self.model} ({self.quantisation}) on {self.gpu}"


class EfficiencyLabel(models.TextChoices):
    MEASURED = "measured", "measured"
    CALIBRATED = "calibrated", "calibrated"
    ESTIMATED = "estimated", "estimated"


class Efficiency(models.Model):
    """Share of the bandwidth roofline decode reaches, for a model class and TP range."""

    moe = models.BooleanField()
    tp_min = models.PositiveSmallIntegerField()
    tp_max = models.PositiveSmallIntegerField()
    low = models.FloatField()
    point = models.FloatField()
    high = models.FloatField()
    label = models.CharField(max_length=12, choices=EfficiencyLabel.choices)
    source = models.CharField(max_length=300)

    class Meta:
        ordering = ["moe", "tp_min"]
        verbose_name_plural = "efficiencies"

    def __str__(self) -> str:
        kind = "MoE" if self.moe else "dense"
        return f"{kind} TP{self.tp_min}-{self.tp_max}: {self.low:g}-{self.high:g} ({self.label})"
