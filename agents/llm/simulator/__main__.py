"""``python -m agents.llm.simulator --port 8090``: the simulator in the foreground."""

from __future__ import annotations

import argparse
import sys

import uvicorn

from agents.llm.simulator.app import create_app
from agents.llm.simulator.server import uvicorn_config
from agents.llm.simulator.state import SimulatorState


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Simulated OpenAI-compatible LLM server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--ttft-ms", type=float, default=200.0)
    parser.add_argument("--tokens-per-s", type=float, default=100.0)
    parser.add_argument("--output-tokens", type=int, default=40)
    parser.add_argument("--jitter", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default="sim-model")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    state = SimulatorState(
        model=args.model,
        seed=args.seed,
        ttft_ms=args.ttft_ms,
        tokens_per_s=args.tokens_per_s,
        output_tokens=args.output_tokens,
        jitter=args.jitter,
    )
    print(f"LLM simulator on http://{args.host}:{args.port}/v1", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn_config(create_app(state), args.host, args.port, args.log_level)).run()


if __name__ == "__main__":
    main()
