#!/usr/bin/env bash
# Install everything and run the whole app: the model server, a Celery worker and Daphne.
# First run: ~10 minutes (vLLM's CPU build installed, the model converted and compiled, once);
# later runs are up in about a minute.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

PORT="${PORT:-8000}"
LLM_PORT="${LLM_PORT:-8081}"
RUN_DIR="$ROOT/.run"
mkdir -p "$RUN_DIR"

ensure_postgres
ensure_redis
ensure_venv
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@localhost:5432/coaching}"
ensure_database "$(basename "${DATABASE_URL%%\?*}")"
ensure_safety_models

pids=()
cleanup() {
  trap - EXIT INT TERM
  say "stopping"
  [ -n "${llm_pgid:-}" ] && kill -- "-$llm_pgid" 2>/dev/null || true
  for pid in "${pids[@]}"; do
    children=$(pgrep -P "$pid" || true)  # a supervise loop's current process
    kill "$pid" 2>/dev/null || true
    [ -n "$children" ] && kill $children 2>/dev/null || true
  done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

# Keep a process running: start it again when it exits, as a process supervisor would in
# production (Celery's worker exits when Redis restarts under it, a kombu 5.7 issue).
supervise() {  # name, log file, command...
  local name="$1" log="$2" child=""
  shift 2
  # Stopped itself (by cleanup, or by a `pkill -f scripts/run.sh`, which matches this subshell
  # too): stop the process first, or it would outlive the run.
  trap '[ -n "$child" ] && kill "$child" 2>/dev/null; exit 0' TERM INT
  while true; do
    "$@" >>"$log" 2>&1 &
    child=$!
    wait "$child" && status=0 || status=$?
    echo ">> $name exited (status $status); starting it again in 2 s" >>"$log"
    say "$name exited (status $status); starting it again in 2 s (log: $log)"
    sleep 2
  done
}

wait_http() {  # url, seconds, what
  for _ in $(seq 1 "$2"); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 1; done
  die "$3 did not come up at $1; see the logs in .run/"
}

if [ -z "${COACHING_LLM_BASE_URL:-}" ]; then
  ensure_engine
  # The whole model on two CPU cores: a turn takes about a minute; give it room.
  export COACHING_TURN_DEADLINE_S="${COACHING_TURN_DEADLINE_S:-300}"
  say "starting the embedded model server (vLLM's CPU build, SmolLM2-135M) on port $LLM_PORT"
  started_at=$(date +%s)
  : >"$RUN_DIR/llm.log"
  # Its own process group, so stopping it stops vLLM's engine and worker processes too.
  setsid "$PY" -m agents.llm.embedded serve --port "$LLM_PORT" >>"$RUN_DIR/llm.log" 2>&1 &
  pids+=($!)
  llm_pgid=$!
fi

say "migrating the database and collecting static files"
"$PY" manage.py migrate --noinput >/dev/null
"$PY" manage.py collectstatic --noinput >/dev/null
if [ -z "${COACHING_LLM_BASE_URL:-}" ]; then
  # --max-concurrency is the app's cross-process slot limit (agents/llm/limits.py): the server's
  # own --max-num-seqs (agents/llm/embedded.py MAX_NUM_SEQS, checked by tests/test_routing.py),
  # so vLLM batches as many requests as it decodes at once; a lower limit would queue them here.
  "$PY" manage.py endpoint_configure embedded --kind vllm --base-url "http://127.0.0.1:$LLM_PORT/v1" \
    --model smollm2-135m-instruct --max-concurrency 16 --read-timeout 300 --priority-scheduling --agents all
else
  "$PY" manage.py endpoint_configure "${COACHING_LLM_NAME:-default}" --kind "${COACHING_LLM_KIND:-vllm}" \
    --base-url "$COACHING_LLM_BASE_URL" --model "${COACHING_LLM_MODEL:?set COACHING_LLM_MODEL to the served model id}" \
    --api-key-env "${COACHING_LLM_API_KEY_ENV:-}" --max-concurrency "${COACHING_LLM_MAX_CONCURRENCY:-8}" --agents all
fi
"$PY" manage.py check --fail-level ERROR >/dev/null

# Prometheus multiprocess mode: the worker, beat and Daphne write their samples here and
# /metrics adds them up. Emptied now, before they start: a previous run's files would be
# counted again (agents/observability/metrics.py). Restarts by supervise keep the directory.
export PROMETHEUS_MULTIPROC_DIR="${PROMETHEUS_MULTIPROC_DIR:-$RUN_DIR/metrics}"
rm -rf "$PROMETHEUS_MULTIPROC_DIR" && mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
if [ -z "${COACHING_METRICS_TOKEN:-}" ] && [ -f "$RUN_DIR/metrics-token" ]; then
  export COACHING_METRICS_TOKEN="$(cat "$RUN_DIR/metrics-token")"
elif [ -z "${COACHING_METRICS_TOKEN:-}" ]; then
  # A token for Prometheus, kept in .run/ (deploy/prometheus.yml reads it from there).
  export COACHING_METRICS_TOKEN="$("$PY" -c 'import secrets; print(secrets.token_urlsafe(32))')"
  (umask 077 && printf '%s' "$COACHING_METRICS_TOKEN" >"$RUN_DIR/metrics-token")
fi

say "starting the Celery worker (thread pool) and Celery beat"
: >"$RUN_DIR/worker.log"
supervise "the Celery worker" "$RUN_DIR/worker.log" "$VENV/bin/celery" -A coaching_site worker -P threads \
  -c "${CELERY_CONCURRENCY:-16}" -l INFO --without-gossip --without-mingle &
pids+=($!)
# Beat (sweeper, idle-session summaries, retention) as its own process, not the worker's -B
# child: a worker killed with its beat inside would leave the beat running beside the new one.
: >"$RUN_DIR/beat.log"
supervise "Celery beat" "$RUN_DIR/beat.log" "$VENV/bin/celery" -A coaching_site beat \
  -s "$RUN_DIR/celerybeat-schedule" -l INFO &
pids+=($!)

say "starting Daphne on port $PORT"
: >"$RUN_DIR/web.log"
# Daphne through coaching_site.serve: oversized or non-UTF-8 frames get a close code (1009/1007).
supervise "Daphne" "$RUN_DIR/web.log" "$PY" -m coaching_site.serve -b 127.0.0.1 -p "$PORT" coaching_site.asgi:application &
pids+=($!)
wait_http "http://127.0.0.1:$PORT/healthz" 60 "Daphne"
if [ -n "${llm_pgid:-}" ]; then
  # vLLM compiles the model on its first start (~3 minutes on two cores), later starts take
  # about a minute; the app is up meanwhile and turns wait for the model.
  "$PY" -m agents.llm.embedded wait --url "http://127.0.0.1:$LLM_PORT" --log "$RUN_DIR/llm.log" --timeout 900 \
    || die "the model server did not start; see .run/llm.log"
  say "model server ready $(( $(date +%s) - started_at )) s after it was started"
fi

"$PY" manage.py seed_demo --base-url "http://127.0.0.1:$PORT"
say "running; logs in .run/ (web.log, worker.log, beat.log, llm.log). Ctrl-C stops everything."
# The worker and Daphne are restarted by their supervise loops; only the model server's exit ends the run.
wait -n "${pids[@]}"
die "a process exited; see the logs in .run/"
