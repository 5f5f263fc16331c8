"""The deployment planner: from the routing (agent → endpoint), each endpoint's placement
(model, quantisation, GPU) and an expected number of concurrent turns, what every instance
needs and does, and what a turn costs in time and money. docs/planner.md explains each formula.

The arithmetic is in small pure functions (tested against hand-computed figures); `plan_build`
reads the database and puts them together; the admin page and `plan_deployment` only format.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from agents.models import Agent, AgentConfig, AgentRun, RunStatus
from planner.models import Efficiency, Gpu, Measurement, ModelCard, Placement

GB = 1e9
# KV cache in bf16 (vLLM's default --kv-cache-dtype auto for bf16 models).
KV_BYTES_PER_VALUE = 2
# What vLLM keeps per GPU besides weights and KV cache (CUDA context, CUDA graphs, activation
# peak): 1-3 GB on 7-70B models in vLLM's start-up logs; 2 GB is planned (estimated).
RUNTIME_OVERHEAD_GB = 2.0
# Share of peak tensor FLOPS that prefill reaches (long prompts, vLLM): estimated; prefill is
# compute-bound, 2 FLOPs per active parameter per token.
PREFILL_MFU = 0.40
TP_CHOICES = (1, 2, 4, 8)
# The turn's stages, and which agents of each can run at once (Coach streams beside Shadow and
# the trio): how many of an endpoint's sequences one turn can have in flight.
STAGES: tuple[tuple[str, ...], ...] = (
    (Agent.COACH, Agent.SHADOW),
    (Agent.COACH, Agent.PERSONA, Agent.PLASTICITY, Agent.STABILITY),
    (Agent.SYNTH,),
    (Agent.CRITIC,),
)
TURN_AGENTS = (Agent.COACH, Agent.SHADOW, *(a for a in (Agent.PERSONA, Agent.PLASTICITY, Agent.STABILITY)))
# Recorded runs read per agent for its token profile (the newest).
PROFILE_RUNS = 500


@dataclass(frozen=True)
class TokenProfile:
    """One agent call's tokens: the prompt, the part of it the shared prefix cache already
    holds when the agent runs, and the reply."""

    prompt: int
    cached: int
    completion: int
    runs: int = 0  # recorded runs it comes from; 0: the default profile


# The default profile, used for an agent without recorded runs: this pipeline's seeded budgets
# (agents/migrations/0002, 0019) at typical use: a ~1,600-token shared prefix (briefing, profile,
# summaries, recent history), each agent's own instructions and schema after it, replies well
# under their max_tokens. Shadow runs first and warms the prefix cache for the trio and Synth.
DEFAULT_PROFILE: dict[str, TokenProfile] = {
    Agent.COACH: TokenProfile(prompt=1900, cached=0, completion=120),
    Agent.SHADOW: TokenProfile(prompt=2200, cached=0, completion=350),
    Agent.PERSONA: TokenProfile(prompt=2200, cached=1600, completion=450),
    Agent.PLASTICITY: TokenProfile(prompt=2100, cached=1600, completion=250),
    Agent.STABILITY: TokenProfile(prompt=2100, cached=1600, completion=250),
    Agent.SYNTH: TokenProfile(prompt=2800, cached=1600, completion=500),
    Agent.CRITIC: TokenProfile(prompt=900, cached=0, completion=120),
}


# --- Pure arithmetic ------------------------------------------------------------------------


def weights_gb(total_params_b: float, bits_per_weight: float) -> float:
    """Every parameter lives in memory, MoE or not: total * bits / 8."""
    return total_params_b * 1e9 * bits_per_weight / 8 / GB


def kv_bytes_per_token(model: ModelCard) -> int | None:
    """K and V, per layer, per KV head, per head dimension, in bf16; None when unknown."""
    if model.kv_bytes_per_token:
        return int(model.kv_bytes_per_token)
    if not (model.layers and model.kv_heads and model.head_dim):
        return None
    return 2 * model.layers * model.kv_heads * model.head_dim * KV_BYTES_PER_VALUE


def kv_cache_gb(per_token: int, tokens_per_sequence: int, sequences: int) -> float:
    return per_token * tokens_per_sequence * sequences / GB


def roofline_tokens_per_s(
    *, active_params_b: float, bits_per_weight: float, bandwidth_gbs: float, tp: int, kv_read_bytes: float = 0.0
) -> float:
    """Batch-1 decode if every byte read per token (the active weights, the sequence's KV cache)
    moved at full bandwidth; TP splits both over `tp` GPUs."""
    bytes_per_token = active_params_b * 1e9 * bits_per_weight / 8 + kv_read_bytes
    return tp * bandwidth_gbs * GB / bytes_per_token


def prefill_seconds(tokens: int, *, active_params_b: float, tflops: float, tp: int) -> float:
    if tokens <= 0:
        return 0.0
    return tokens * 2 * active_params_b * 1e9 / (tp * tflops * 1e12 * PREFILL_MFU)


def critical_path_s(stage_seconds: dict[str, float]) -> float:
    """Shadow, then the slowest specialist, then Synth, then the critic (Coach runs beside)."""
    trio = max(stage_seconds.get(a, 0.0) for a in (Agent.PERSONA, Agent.PLASTICITY, Agent.STABILITY))
    return (
        stage_seconds.get(Agent.SHADOW, 0.0)
        + trio
        + stage_seconds.get(Agent.SYNTH, 0.0)
        + stage_seconds.get(Agent.CRITIC, 0.0)
    )


def peak_sequences_per_turn(agents: set[str]) -> int:
    return max(len(agents & set(stage)) for stage in STAGES) if agents else 0


# --- Plans ----------------------------------------------------------------------------------


@dataclass
class Interval:
    low: float
    point: float
    high: float
    label: str
    source: str


@dataclass
class InstancePlan:
    """One vLLM instance: an endpoint's model on `tp` GPUs."""

    endpoint: str
    served_name: str
    agents: list[str]
    model: ModelCard
    quantisation: str
    bits_per_weight: float
    gpu: Gpu
    tp: int
    fits: bool
    weights_gb: float
    kv_per_token: int | None
    sequences: int
    tokens_per_sequence: int
    kv_gb: float
    need_per_gpu_gb: float
    usable_per_gpu_gb: float
    roofline: float
    efficiency: Interval
    decode: Interval  # tokens/s per stream
    prefill_tokens_per_s: float | None  # measured, when a run recorded it
    gpu_memory_utilization: float
    port: int
    max_concurrency: int
    priority_scheduling: bool
    problems: list[str] = field(default_factory=list)
    turns_per_hour: float = 0.0

    @property
    def cost_per_hour(self) -> float:
        return self.tp * self.gpu.hourly_usd

    def decode_s(self, tokens: int, *, rate: str = "point") -> float:
        value = getattr(self.decode, rate)
        return tokens / value if value > 0 else math.inf

    def prefill_s(self, tokens: int) -> float:
        if self.prefill_tokens_per_s:
            return tokens / self.prefill_tokens_per_s
        quant_fp8 = self.quantisation == "fp8" and self.gpu.fp8_tflops
        tflops = float(self.gpu.fp8_tflops) if quant_fp8 and self.gpu.fp8_tflops else self.gpu.bf16_tflops
        return prefill_seconds(tokens, active_params_b=self.model.active_params_b, tflops=tflops, tp=self.tp)

    def vllm_serve(self) -> str:
        quant = self.model.quantisation(self.quantisation)
        checkpoint = str(quant.get("checkpoint") or self.model.hf_id)
        parts = [
            f"vllm serve {checkpoint}",
            f"--served-model-name {self.served_name}",
            f"--port {self.port}",
        ]
        if self.tp > 1:
            parts.append(f"--tensor-parallel-size {self.tp}")
        parts += [
            f"--max-model-len {self.tokens_per_sequence}",
            f"--max-num-seqs {max(1, self.sequences)}",
            f"--gpu-memory-utilization {self.gpu_memory_utilization:g}",
            "--enable-prefix-caching",
        ]
        if self.priority_scheduling:
            parts.append("--scheduling-policy priority")
        if quant.get("vllm_args"):
            parts.append(str(quant["vllm_args"]))
        if self.quantisation == "fp8" and not quant.get("checkpoint") and self.model.hf_id == checkpoint:
            parts.append("--quantization fp8")
        return " ".join(parts)


@dataclass
class AgentStage:
    agent: str
    endpoint: str
    profile: TokenProfile
    prefill_s: float
    decode: Interval  # seconds to write the reply: low is the fast end
    total_s: float


@dataclass
class Plan:
    concurrent_turns: int
    instances: list[InstancePlan]
    stages: dict[str, AgentStage]
    gpus: list[dict[str, Any]]  # packing: one entry per physical GPU
    coach_first_token_s: float
    turn_s: Interval  # the critical path (Shadow + slowest specialist + Synth + critic)
    turns_per_hour: float
    cost_per_hour: float
    problems: list[str]

    @property
    def cost_per_thousand_turns(self) -> float:
        return self.cost_per_hour / self.turns_per_hour * 1000 if self.turns_per_hour > 0 else math.inf


def efficiency_for(model: ModelCard, gpu: Gpu, tp: int, quantisation: str, roofline: float) -> Interval:
    """A recorded run of this model on this GPU and TP degree gives a measured efficiency;
    else the calibrated (or estimated) one of the model's class."""
    run = Measurement.objects.filter(model=model, gpu=gpu, tensor_parallel=tp, quantisation=quantisation).first()
    if run is not None and roofline > 0:
        low, high = run.decode_low / roofline, run.decode_high / roofline
        return Interval(low, (low + high) / 2, high, "measured", run.source)
    row = Efficiency.objects.filter(moe=model.moe, tp_min__lte=tp, tp_max__gte=tp).first()
    if row is None:
        return Interval(0.3, 0.3, 0.3, "estimated", "no efficiency row for this class: 0.3 assumed")
    return Interval(row.low, row.point, row.high, row.label, row.source)


def instance_plan(
    *,
    endpoint: str,
    served_name: str,
    agents: list[str],
    model: ModelCard,
    quantisation: str,
    gpu: Gpu,
    tp: int | None,
    concurrent_turns: int,
    tokens_per_sequence: int,
    max_concurrency: int = 8,
    priority_scheduling: bool = False,
    gpu_memory_utilization: float = 0.9,
    port: int = 8000,
    mean_context: int = 0,
) -> InstancePlan:
    """Size one instance: weights, KV cache for its sequences, the least TP degree that holds
    both (when `tp` is None), and its decode rate with the efficiency interval."""
    quant = model.quantisation(quantisation)
    bits = float(str(quant["bits_per_weight"]))
    weights = weights_gb(model.total_params_b, bits)
    per_token = kv_bytes_per_token(model)
    wanted = peak_sequences_per_turn(set(agents)) * concurrent_turns
    sequences = max(1, min(wanted, max_concurrency) if max_concurrency > 0 else wanted)
    kv = kv_cache_gb(per_token, tokens_per_sequence, sequences) if per_token else 0.0
    usable = gpu.memory_gb * gpu_memory_utilization - RUNTIME_OVERHEAD_GB
    problems: list[str] = []
    if per_token is None:
        problems.append(f"{model.name}: KV-cache geometry unknown; KV cache left out")
    if tp is None:
        tp = next((n for n in TP_CHOICES if (weights + kv) / n <= usable), TP_CHOICES[-1])
    need = (weights + kv) / tp
    fits = need <= usable
    if not fits:
        problems.append(
            f"{endpoint}: needs {need:.1f} GB per GPU on {tp}x {gpu.label}, {usable:.1f} GB usable"
            f" (weights {weights:.1f} GB + KV {kv:.1f} GB)"
        )
    kv_read = (per_token or 0) * mean_context
    roof = roofline_tokens_per_s(
        active_params_b=model.active_params_b,
        bits_per_weight=bits,
        bandwidth_gbs=gpu.bandwidth_gbs,
        tp=tp,
        kv_read_bytes=kv_read,
    )
    eff = efficiency_for(model, gpu, tp, quantisation, roof)
    run = Measurement.objects.filter(model=model, gpu=gpu, tensor_parallel=tp, quantisation=quantisation).first()
    decode = Interval(roof * eff.low, roof * eff.point, roof * eff.high, eff.label, eff.source)
    return InstancePlan(
        endpoint=endpoint,
        served_name=served_name,
        agents=sorted(agents),
        model=model,
        quantisation=quantisation,
        bits_per_weight=bits,
        gpu=gpu,
        tp=tp,
        fits=fits,
        weights_gb=weights,
        kv_per_token=per_token,
        sequences=sequences,
        tokens_per_sequence=tokens_per_sequence,
        kv_gb=kv,
        need_per_gpu_gb=need,
        usable_per_gpu_gb=usable,
        roofline=roof,
        efficiency=eff,
        decode=decode,
        prefill_tokens_per_s=run.prefill_tokens_per_s if run is not None else None,
        gpu_memory_utilization=gpu_memory_utilization,
        port=port,
        max_concurrency=max_concurrency,
        priority_scheduling=priority_scheduling,
        problems=problems,
    )


def pack(instances: list[InstancePlan]) -> list[dict[str, Any]]:
    """Physical GPUs: a TP>1 instance takes whole GPUs; one-GPU instances share a GPU of their
    type while their memory needs fit (first fit, largest first; each gets a
    --gpu-memory-utilization share)."""
    gpus: list[dict[str, Any]] = []
    for inst in sorted(instances, key=lambda i: -i.need_per_gpu_gb):
        need = inst.need_per_gpu_gb + RUNTIME_OVERHEAD_GB
        if inst.tp == 1:
            for gpu in gpus:
                if gpu["type"] == inst.gpu.name and gpu["free_gb"] >= need and not gpu["tp_group"]:
                    gpu["instances"].append(inst.endpoint)
                    gpu["free_gb"] -= need
                    break
            else:
                gpus.append(_gpu_slot(inst, need, tp_group=False))
        else:
            for _ in range(inst.tp):
                gpus.append(_gpu_slot(inst, need, tp_group=True))
    for index, gpu in enumerate(gpus):
        gpu["index"] = index
    return gpus


def _gpu_slot(inst: InstancePlan, need: float, *, tp_group: bool) -> dict[str, Any]:
    return {
        "type": inst.gpu.name,
        "label": inst.gpu.label,
        "instances": [inst.endpoint],
        "free_gb": inst.gpu.memory_gb - need,
        "tp_group": tp_group,
    }


def token_profiles(agents: list[str]) -> dict[str, TokenProfile]:
    """Each agent's median tokens from its recorded, succeeded runs; the default profile for
    an agent without any."""
    profiles: dict[str, TokenProfile] = {}
    for agent in agents:
        rows = list(
            AgentRun.objects.filter(
                agent=agent, status=RunStatus.SUCCEEDED, prompt_tokens__isnull=False, completion_tokens__isnull=False
            )
            .order_by("-pk")
            .values_list("prompt_tokens", "completion_tokens", "context_dropped")[:PROFILE_RUNS]
        )
        if not rows:
            profiles[agent] = DEFAULT_PROFILE.get(agent, TokenProfile(2000, 0, 300))
            continue
        prompt = int(statistics.median(int(r[0] or 0) for r in rows))
        completion = int(statistics.median(int(r[1] or 0) for r in rows))
        shared = [int((r[2] or {}).get("shared_tokens") or 0) for r in rows]
        # Shadow and Coach meet a cold prefix; the agents after Shadow find it cached.
        cached = 0 if agent in (Agent.COACH, Agent.SHADOW, Agent.CRITIC) else int(statistics.median(shared))
        profiles[agent] = TokenProfile(prompt, min(cached, prompt), completion, len(rows))
    return profiles


def plan_turn(
    instances: list[InstancePlan], routing: dict[str, str], profiles: dict[str, TokenProfile], concurrent_turns: int
) -> tuple[dict[str, AgentStage], float, Interval, float]:
    """Each agent's time on its instance, Coach's first token, the critical path (interval from
    the decode rate's interval) and turns/hour at the given concurrency."""
    by_endpoint = {i.endpoint: i for i in instances}
    stages: dict[str, AgentStage] = {}
    for agent, endpoint in routing.items():
        inst = by_endpoint.get(endpoint)
        if inst is None:
            continue
        profile = profiles[agent]
        prefill = inst.prefill_s(profile.prompt - profile.cached)
        # Fast end at the high decode rate, slow end at the low one.
        decode = Interval(
            inst.decode_s(profile.completion, rate="high"),
            inst.decode_s(profile.completion),
            inst.decode_s(profile.completion, rate="low"),
            inst.decode.label,
            inst.decode.source,
        )
        stages[agent] = AgentStage(agent, endpoint, profile, prefill, decode, prefill + decode.point)
    coach = stages.get(Agent.COACH)
    first_token = coach.prefill_s if coach is not None else 0.0

    def path(rate: str) -> float:
        return critical_path_s({a: s.prefill_s + getattr(s.decode, rate) for a, s in stages.items()})

    turn = Interval(path("low"), path("point"), path("high"), "", "")
    per_hour = concurrent_turns * 3600 / turn.point if turn.point > 0 else 0.0
    return stages, first_token, turn, per_hour


def plan_build(*, concurrent_turns: int = 4) -> Plan:
    """The plan for the current routing and placements."""
    configs = list(AgentConfig.objects.select_related("endpoint").filter(enabled=True))
    routing = {c.agent: c.endpoint.name for c in configs if c.agent in DEFAULT_PROFILE}
    placements = {p.endpoint.name: p for p in Placement.objects.select_related("endpoint", "model", "gpu")}
    budgets: dict[str, int] = {}
    for config in configs:
        if config.agent in routing:
            budgets[config.endpoint.name] = max(
                budgets.get(config.endpoint.name, 0), config.context_budget + config.max_tokens
            )
    problems = [f"{name}: no placement (model and GPU) yet" for name in sorted(set(routing.values()) - set(placements))]
    instances = []
    profiles = token_profiles(list(routing))
    for name, placement in placements.items():
        agents = [a for a, e in routing.items() if e == name]
        if not agents:
            continue
        mean_context = int(statistics.mean(profiles[a].prompt + profiles[a].completion / 2 for a in agents))
        inst = instance_plan(
            endpoint=name,
            served_name=placement.endpoint.model_id,
            agents=agents,
            model=placement.model,
            quantisation=placement.quantisation,
            gpu=placement.gpu,
            tp=placement.tensor_parallel,
            concurrent_turns=concurrent_turns,
            tokens_per_sequence=min(budgets.get(name, 4096), placement.model.context_length),
            max_concurrency=placement.endpoint.max_concurrency,
            priority_scheduling=placement.endpoint.priority_scheduling,
            gpu_memory_utilization=placement.gpu_memory_utilization,
            port=placement.port,
            mean_context=mean_context,
        )
        problems += inst.problems
        instances.append(inst)
    return assemble(instances, routing, profiles, concurrent_turns, problems)


def assemble(
    instances: list[InstancePlan],
    routing: dict[str, str],
    profiles: dict[str, TokenProfile],
    concurrent_turns: int,
    problems: list[str],
) -> Plan:
    stages, first_token, turn, per_hour = plan_turn(instances, routing, profiles, concurrent_turns)
    for inst in instances:
        # Each instance serves every turn; its share of the turn bounds it at this concurrency.
        busy = sum(s.total_s for s in stages.values() if s.endpoint == inst.endpoint)
        limit = inst.sequences / max(1, peak_sequences_per_turn(set(inst.agents)))
        inst.turns_per_hour = limit * 3600 / busy if busy > 0 else 0.0
    system = min([per_hour, *(i.turns_per_hour for i in instances)]) if instances else 0.0
    return Plan(
        concurrent_turns=concurrent_turns,
        instances=instances,
        stages=stages,
        gpus=pack(instances),
        coach_first_token_s=first_token,
        turn_s=turn,
        turns_per_hour=system,
        cost_per_hour=sum(i.cost_per_hour for i in instances),
        problems=problems,
    )


def original_setup(*, model: str, quantisation: str, gpu: str, gpus: int, concurrent_turns: int = 1) -> Plan:
    """The coaching write-up's setups: every agent on one instance of `model` on `gpus` GPUs,
    with this pipeline's recorded token counts (or the default profile)."""
    card = ModelCard.objects.get(name=model)
    device = Gpu.objects.get(name=gpu)
    agents = list(DEFAULT_PROFILE)
    profiles = token_profiles(agents)
    inst = instance_plan(
        endpoint="all-agents",
        served_name=card.name,
        agents=agents,
        model=card,
        quantisation=quantisation,
        gpu=device,
        tp=gpus,
        concurrent_turns=concurrent_turns,
        tokens_per_sequence=8192,
        max_concurrency=8,
        mean_context=int(statistics.mean(p.prompt + p.completion / 2 for p in profiles.values())),
    )
    return assemble([inst], dict.fromkeys(agents, "all-agents"), profiles, concurrent_turns, list(inst.problems))
