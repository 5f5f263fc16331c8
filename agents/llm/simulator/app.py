"""The OpenAI-compatible HTTP app: chat completions, models, health and tokenize endpoints
(vLLM, llama.cpp and llama-cpp-python forms), plus the control routes from control.py. It stands
in for vLLM / llama.cpp, so other processes call it with the official ``openai`` client.

The agent is taken from the ``X-Coaching-Agent`` header ("default" if absent).
"""

from __future__ import annotations

import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Send

from agents.llm.simulator.control import control_routes
from agents.llm.simulator.faults import HTTP_FAULTS
from agents.llm.simulator.responses import GuardedResponse, error_response, json_body, run_complete, run_stream
from agents.llm.simulator.state import SimulatorState
from agents.llm.simulator.tokens import MAX_MODEL_LEN, messages_to_text, tokenize


def create_app(state: SimulatorState) -> Starlette:
    """The Starlette app; all behaviour lives in ``state``."""

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def models(request: Request) -> Response:
        model = {"id": state.model, "object": "model", "created": 0, "owned_by": "simulator"}
        return JSONResponse({"object": "list", "data": [model]})

    async def chat(request: Request) -> Response:
        received_at = time.time()
        body = await json_body(request)
        if body is None or not isinstance(body.get("messages"), list):
            return error_response(400, "body must be a JSON object with a 'messages' list", "invalid_request_error")
        agent = request.headers.get("x-coaching-agent") or "default"
        state.request_started()
        try:
            plan = state.plan_call(agent, request.headers.get("x-coaching-turn"), body, received_at)
        except BaseException:
            state.request_ended()
            raise
        rec = plan.record
        if plan.fault in HTTP_FAULTS:
            state.request_ended()
            status, kind, headers = HTTP_FAULTS[plan.fault]
            rec["status"], rec["finished_at"] = status, time.time()
            return error_response(status, f"simulated {plan.fault} for agent {agent}", kind, headers)

        def on_disconnect() -> None:
            rec["cancelled"], rec["finished_at"] = True, time.time()

        async def run(send: Send) -> None:
            try:
                await (run_stream(plan, send) if plan.stream else run_complete(plan, send))
            finally:
                state.request_ended()

        return GuardedResponse(run, on_disconnect)

    async def tokenize_llama(request: Request) -> Response:
        body = await json_body(request) or {}
        if "content" in body:  # llama.cpp server
            return JSONResponse({"tokens": tokenize(str(body["content"]))})
        if isinstance(body.get("messages"), list):  # vLLM chat form
            tokens = tokenize(messages_to_text(body["messages"]))
        else:  # vLLM completion form
            tokens = tokenize(str(body.get("prompt", "")))
        return JSONResponse({"tokens": tokens, "count": len(tokens), "max_model_len": MAX_MODEL_LEN})

    async def tokenize_extras(request: Request) -> Response:
        body = await json_body(request) or {}  # llama-cpp-python server
        tokens = tokenize(str(body.get("input", "")))
        if request.url.path.endswith("/count"):
            return JSONResponse({"count": len(tokens)})
        return JSONResponse({"tokens": tokens})

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/v1/models", models),
            Route("/models", models),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/chat/completions", chat, methods=["POST"]),
            Route("/tokenize", tokenize_llama, methods=["POST"]),
            Route("/extras/tokenize", tokenize_extras, methods=["POST"]),
            Route("/extras/tokenize/count", tokenize_extras, methods=["POST"]),
            *control_routes(state),
        ]
    )
