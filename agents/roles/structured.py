"""One structured (JSON) model call: the schema sent for constrained decoding, bounded retries
for transient errors, validation in Python and one second attempt for an invalid answer.

Used by the turn's JSON agents (pipeline.runner.run_json_agent), operators' replays (operations.replay) and
the summaries (compaction). Records nothing: the callers record what they need.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings
from pydantic import ValidationError

from agents.llm.client import Completion, EndpointSpec, chat_complete
from agents.llm.errors import LLMCircuitOpen, LLMError, LLMOutputError, LLMTransientError
from agents.llm.routing import RouteReport, cache_salt_for, complete_routed, routes_for
from agents.llm.schema import extra_body_for, json_schema_for, response_format_for
from agents.roles.schemas import OUTPUT_SCHEMAS, AgentOutput

if TYPE_CHECKING:
    from agents.models import AgentConfig

# Below this many seconds before a stage deadline, a retry is not worth starting.
MIN_CALL_SECONDS = 0.5
REPAIR_INSTRUCTION = (
    "Your reply could not be used: {errors}. Reply again with only the corrected JSON, following the schema."
)
# An answer cut off by the token limit is a small model looping ("1.1.1.1...", one emoji
# hundreds of times): showing it the loop in a repair prompt made it loop again (5 of 19 Synth
# runs on the embedded model failed both attempts so). Its second attempt is a fresh sample of
# the same prompt instead, with repeated tokens penalised (OpenAI's frequency_penalty, which
# vLLM and llama.cpp take too) so the loop breaks after a few repeats; kept low because
# ordinary Russian text repeats its byte-level tokens.
LOOP_BREAKING_FREQUENCY_PENALTY = 0.3


def request_headers(agent: str, turn_id: int, *, replay: bool = False) -> dict[str, str]:
    # Lets the server (and the test simulator) attribute each call to its agent and turn, and
    # tell an operator's replay from the turn itself.
    headers = {"X-Coaching-Agent": agent, "X-Coaching-Turn": str(turn_id)}
    if replay:
        headers["X-Coaching-Replay"] = "1"
    return headers


# --- Calling a model with bounded retries and one repair --------------------------------


@dataclass
class CallCounter:
    """Model calls made for one AgentRun, failed ones included."""

    calls: int = 0


def call_with_retries(call: Callable[[float], Completion], *, deadline: float, counter: CallCounter) -> Completion:
    """Retry transient errors with exponential backoff until the deadline; permanent ones raise at once."""
    retries = 0
    while True:
        remaining = deadline - time.time()
        if remaining < MIN_CALL_SECONDS:
            raise LLMTransientError("no time left before the stage deadline")
        counter.calls += 1
        try:
            return call(remaining)
        except LLMCircuitOpen:
            raise  # the breaker is open: a retry now would only meet it again
        except LLMTransientError:
            if retries >= settings.COACHING_LLM_MAX_RETRIES:
                raise
            retries += 1
            backoff = settings.COACHING_LLM_RETRY_BACKOFF_S * 2 ** (retries - 1)
            time.sleep(min(backoff, max(0.0, (deadline - time.time()) / 2)))


def parse_output(completion: Completion, schema: type[AgentOutput], context: dict[str, Any]) -> AgentOutput:
    if completion.finish_reason == "length":
        raise LLMOutputError("the reply was cut off by the token limit", raw=completion.content)
    try:
        # strict=False accepts raw newlines inside strings, which grammar-constrained small
        # models emit; anything else that is not JSON is still refused.
        data = json.loads(completion.content, strict=False)
    except json.JSONDecodeError as exc:
        raise LLMOutputError(f"the reply is not JSON ({exc.msg})", raw=completion.content) from exc
    try:
        return schema.model_validate(data, context=context)
    except ValidationError as exc:
        # include_input=False: validation errors must not copy coachee text into logs.
        errors = [
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
            for err in exc.errors(include_input=False, include_url=False)
        ]
        raise LLMOutputError("the reply does not follow the schema", raw=completion.content, errors=errors) from exc


@dataclass
class StructuredAnswer:
    """What one JSON agent call (with retries and one repair) produced."""

    output: AgentOutput | None
    raw: str
    errors: list[str]
    calls: int
    prompt_tokens: int
    completion_tokens: int
    failure: LLMError | None
    # Which endpoint answered, what the slots cost, which endpoints failed first.
    route: RouteReport = field(default_factory=RouteReport)


def complete_structured(
    *,
    agent: str,
    config: AgentConfig,
    messages: list[dict[str, str]],
    enums: dict[str, list[Any]],
    deadline: float,
    turn_id: int,
    replay: bool = False,
    coachee_id: int | None = None,
) -> StructuredAnswer:
    """Ask the agent's endpoint for schema-valid JSON: retries for transient errors, one repair
    for invalid output. Each call goes to the agent's primary endpoint, or to its fallbacks in
    order when the one before fails before answering (agents.llm.routing), holding one of the
    endpoint's slots while it runs. Records nothing: run_json_agent and replays record what
    they need. `coachee_id` salts the prefix cache per coachee (vLLM's cache_salt)."""
    schema = OUTPUT_SCHEMAS[agent]
    routes = routes_for(config)
    if replay:
        # A replay sends a stored prompt: only to endpoints a platform administrator vouched for.
        routes = [r for r in routes if r.trusted_for_coachee_data] or routes[:1]
    validation_context = {key: set(vals) for key, vals in enums.items()}
    json_schema = json_schema_for(schema, enums)
    salt = cache_salt_for(coachee_id) if coachee_id is not None else None
    report = RouteReport()

    def send(msgs: list[dict[str, str]], spec: EndpointSpec, timeout_s: float, penalty: float | None) -> Completion:
        return chat_complete(
            spec,
            msgs,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            # Per endpoint: each kind spells constrained decoding and its extras its own way.
            response_format=response_format_for(spec.kind, f"{agent}_output", json_schema),
            frequency_penalty=penalty,
            extra_body=extra_body_for(
                spec.kind,
                thinking=config.thinking,
                priority_of=agent if spec.priority_scheduling else None,
                cache_salt=salt,
            ),
            headers=request_headers(agent, turn_id, replay=replay),
            timeout_s=timeout_s,
        )

    def call(msgs: list[dict[str, str]], penalty: float | None) -> Callable[[float], Completion]:
        return lambda timeout_s: complete_routed(
            routes,
            lambda spec, remaining: send(msgs, spec, min(timeout_s, remaining), penalty),
            deadline=min(deadline, time.time() + timeout_s),
            report=report,
        )

    counter = CallCounter()
    prompt_tokens = completion_tokens = 0
    errors: list[str] = []
    raw = ""
    cut_off = False
    try:
        for second_attempt in (False, True):
            msgs, penalty = messages, None
            if second_attempt and cut_off:
                penalty = LOOP_BREAKING_FREQUENCY_PENALTY
            elif second_attempt:
                msgs = [
                    *messages,
                    {"role": "assistant", "content": raw},
                    {"role": "user", "content": REPAIR_INSTRUCTION.format(errors="; ".join(errors[-5:]))},
                ]
            completion = call_with_retries(call(msgs, penalty), deadline=deadline, counter=counter)
            cut_off = completion.finish_reason == "length"
            prompt_tokens += completion.prompt_tokens or 0
            completion_tokens += completion.completion_tokens or 0
            raw = completion.content
            try:
                output = parse_output(completion, schema, validation_context)
            except LLMOutputError as exc:
                errors += [f"attempt {counter.calls}: {e}" for e in exc.errors]
                continue
            return StructuredAnswer(output, raw, errors, counter.calls, prompt_tokens, completion_tokens, None, report)
        raise LLMOutputError("no valid output after one repair attempt", raw=raw, errors=errors)
    except LLMError as exc:
        return StructuredAnswer(None, raw, errors, counter.calls, prompt_tokens, completion_tokens, exc, report)
