"""The HTTP answers: error bodies, and a planned call written out streamed (SSE) or whole,
with its stalls and drops, while watching for the client going away."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from agents.llm.simulator.state import Plan

MAX_CHUNK_TIMES = 200


def error_response(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    return JSONResponse(body, status_code=status, headers=headers)


async def json_body(request: Request) -> dict[str, Any] | None:
    try:
        body = await request.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


async def _wait_for_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class GuardedResponse(Response):
    """Runs ``body(send)`` but cancels it as soon as the client disconnects.

    Watching ``receive`` matters while we sleep (ttft, timeout, hang): without
    it a gone client would only be noticed on the next write, or never.
    """

    def __init__(self, body: Callable[[Send], Awaitable[None]], on_disconnect: Callable[[], None]) -> None:
        super().__init__()
        self._body, self._on_disconnect = body, on_disconnect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        work = asyncio.ensure_future(self._body(send))
        watch = asyncio.ensure_future(_wait_for_disconnect(receive))
        try:
            done, _ = await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # uvicorn cancels requests still running at shutdown (a hung stream): end quietly,
            # it closes the connection; re-raising would only log a traceback.
            self._on_disconnect()
            return
        finally:
            watch.cancel()
            if not work.done():
                work.cancel()
        if work in done:
            work.result()
            return
        self._on_disconnect()
        with suppress(asyncio.CancelledError):
            await work


def _sse(payload: Any) -> dict[str, Any]:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return {"type": "http.response.body", "body": f"data: {data}\n\n".encode(), "more_body": True}


def _usage(plan: Plan) -> dict[str, int]:
    prompt, completion = plan.record["prompt_tokens"], plan.record["completion_tokens"]
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def _sleep_until(loop: asyncio.AbstractEventLoop, deadline: float) -> None:
    # Absolute deadlines keep long streams from drifting.
    await asyncio.sleep(max(0.0, deadline - loop.time()))


async def run_stream(plan: Plan, send: Send) -> None:
    rec, loop = plan.record, asyncio.get_running_loop()
    if plan.fault == "timeout":
        await asyncio.sleep(plan.profile.delay_s)  # before any byte
    headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
    rec["status"] = 200  # records are updated before each send: the client may read them at once
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    base = {"id": rec["id"], "object": "chat.completion.chunk", "created": int(time.time()), "model": plan.model}

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**base, "choices": [choice], **extra}

    await send(_sse(chunk({"role": "assistant", "content": ""})))
    if plan.fault == "hang":
        await asyncio.sleep(plan.profile.delay_s)  # until the client gives up
    start = loop.time()
    for i, piece in enumerate(plan.pieces):
        await _sleep_until(loop, start + plan.offsets[i])
        now = time.time()
        rec["first_token_at"] = rec["first_token_at"] or now
        if len(rec["chunk_times"]) < MAX_CHUNK_TIMES:
            rec["chunk_times"].append(now)
        rec["completion_tokens"] = i + 1
        if plan.fault == "drop" and i + 1 >= plan.profile.drop_after_tokens:
            rec["finished_at"] = now
        await send(_sse(chunk({"content": piece}, sim_emitted_at=now)))
        if rec["finished_at"]:
            break
    if plan.fault == "drop":
        rec["finished_at"] = rec["finished_at"] or time.time()
        return  # no terminating chunk: uvicorn closes the connection mid-body
    if not plan.pieces:
        await _sleep_until(loop, start + plan.total_s)
    rec["first_token_at"] = rec["first_token_at"] or time.time()
    rec["finish_reason"], rec["finished_at"] = plan.finish_reason, time.time()
    await send(_sse(chunk({}, plan.finish_reason)))
    if plan.include_usage:
        await send(_sse({**base, "choices": [], "usage": _usage(plan)}))
    await send(_sse("[DONE]"))
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def run_complete(plan: Plan, send: Send) -> None:
    rec, loop = plan.record, asyncio.get_running_loop()
    if plan.fault in ("timeout", "hang"):
        await asyncio.sleep(plan.profile.delay_s)
    start = loop.time()
    await _sleep_until(loop, start + (plan.offsets[0] if plan.offsets else plan.total_s))
    rec["first_token_at"] = time.time()
    await _sleep_until(loop, start + plan.total_s)
    rec["completion_tokens"] = len(plan.pieces)
    message = {"role": "assistant", "content": "".join(plan.pieces)}
    body = json.dumps(
        {
            "id": rec["id"],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": plan.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": plan.finish_reason}],
            "usage": _usage(plan),
        },
        ensure_ascii=False,
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    rec["status"], rec["finished_at"] = 200, time.time()
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    if plan.fault == "drop":  # promise the full length, send half, then the server closes
        await send({"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True})
        return
    rec["finish_reason"] = plan.finish_reason
    await send({"type": "http.response.body", "body": body, "more_body": False})
