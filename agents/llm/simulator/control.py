"""The control API that tests and the benchmark use to set profiles and faults and to read the
call log and concurrency: the ``/_sim/*`` routes, and ``SimulatorControl``, their HTTP client."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agents.llm.simulator.responses import error_response, json_body
from agents.llm.simulator.state import SimulatorState


def control_routes(state: SimulatorState) -> list[Route]:
    """``/_sim/config`` (GET/POST), ``/_sim/reset``, ``/_sim/calls``, ``/_sim/concurrency``."""

    async def sim_config(request: Request) -> Response:
        if request.method == "GET":
            return JSONResponse(state.config())
        body = await json_body(request)
        if body is None:
            return error_response(400, "body must be a JSON object", "invalid_request_error")
        try:
            return JSONResponse(state.configure(body.get("default"), body.get("agents")))
        except (ValueError, TypeError, AttributeError) as exc:
            return error_response(400, str(exc), "invalid_request_error")

    async def sim_reset(request: Request) -> Response:
        state.reset()
        return JSONResponse({"status": "ok"})

    async def sim_calls(request: Request) -> Response:
        return JSONResponse(state.calls(request.query_params.get("agent"), request.query_params.get("turn")))

    async def sim_concurrency(request: Request) -> Response:
        return JSONResponse(state.concurrency())

    return [
        Route("/_sim/config", sim_config, methods=["GET", "POST"]),
        Route("/_sim/reset", sim_reset, methods=["POST"]),
        Route("/_sim/calls", sim_calls),
        Route("/_sim/concurrency", sim_concurrency),
    ]


class SimulatorControl:
    """Steers a simulator in another process; same methods as ``SimulatorServer``."""

    def __init__(self, base_url: str, timeout_s: float = 10.0) -> None:
        root = base_url.rstrip("/")
        self.root_url = root.removesuffix("/v1")
        self._http = httpx.Client(base_url=self.root_url, timeout=timeout_s)

    def health(self) -> bool:
        try:
            return self._http.get("/health").status_code == 200
        except httpx.HTTPError:
            return False

    def configure(
        self, default: Mapping[str, Any] | None = None, agents: Mapping[str, Mapping[str, Any]] | None = None
    ) -> dict[str, Any]:
        response = self._http.post("/_sim/config", json={"default": default or {}, "agents": agents or {}})
        if response.status_code == 400:
            raise ValueError(response.json()["error"]["message"])
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def reset(self) -> None:
        self._http.post("/_sim/reset").raise_for_status()

    def calls(self, agent: str | None = None, turn: str | int | None = None) -> list[dict[str, Any]]:
        params = {k: str(v) for k, v in (("agent", agent), ("turn", turn)) if v is not None}
        response = self._http.get("/_sim/calls", params=params)
        response.raise_for_status()
        result: list[dict[str, Any]] = response.json()
        return result

    def concurrency(self) -> dict[str, int]:
        response = self._http.get("/_sim/concurrency")
        response.raise_for_status()
        result: dict[str, int] = response.json()
        return result

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
