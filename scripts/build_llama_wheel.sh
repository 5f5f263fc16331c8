#!/usr/bin/env bash
# Build (once) and print the path of a portable llama-cpp-python wheel.
#
# The wheel is cached outside the repo, keyed by the package version, the Python
# version, the machine and the exact CMake flags, so a clean clone on the same
# machine reuses it and a wheel built with other flags is never picked up.
# A native build (-march=native) dies with "Illegal instruction" on this kind of
# machine at the first completion, hence GGML_NATIVE=OFF with explicit ISA flags.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
LLAMA_CMAKE_ARGS="${LLAMA_CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_CURL=OFF}"
PYTHON="${PYTHON:-python3}"

py_tag=$("$PYTHON" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
key=$(printf '%s|%s|%s|%s' "$LLAMA_CPP_PYTHON_VERSION" "$py_tag" "$(uname -m)" "$LLAMA_CMAKE_ARGS" | sha256sum | cut -c1-16)
cache_dir="${COACHING_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/coaching-chat}/wheels/llama-cpp-python-$key"

existing=$(ls "$cache_dir"/llama_cpp_python-*.whl 2>/dev/null | head -n1 || true)
if [ -n "$existing" ]; then
  echo "$existing"
  exit 0
fi

mkdir -p "$cache_dir"
log="$cache_dir/build.log"
echo ">> Building llama-cpp-python $LLAMA_CPP_PYTHON_VERSION for the CPU (first time only, 10-15 minutes on 2 cores)." >&2
echo ">> flags: $LLAMA_CMAKE_ARGS" >&2
echo ">> full log: $log" >&2
tmp=$(mktemp -d)
(
  export CMAKE_ARGS="$LLAMA_CMAKE_ARGS"
  export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
  export FORCE_CMAKE=1
  "$PYTHON" -m pip wheel --no-deps --no-cache-dir -v -w "$tmp" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
) >"$log" 2>&1 &
build_pid=$!
# Progress every 15 s: the last "[n/total]" step Ninja printed (or "[ n%]" from Make).
while kill -0 "$build_pid" 2>/dev/null; do
  sleep 15
  step=$(grep -oE '\[[0-9]+/[0-9]+\]|\[ *[0-9]+%\]' "$log" 2>/dev/null | tail -n1 || true)
  echo ">> llama.cpp build: ${step:-configuring} ($(date +%H:%M:%S))" >&2
done
if ! wait "$build_pid"; then
  echo "!! llama-cpp-python build failed; the last lines of $log:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
mv "$tmp"/llama_cpp_python-*.whl "$cache_dir"/
rm -rf "$tmp"
ls "$cache_dir"/llama_cpp_python-*.whl | head -n1
