#!/usr/bin/env bash
# Install everything and run the whole app: the model server, a Celery worker and Daphne.
# First run: ~15 minutes (llama.cpp is compiled once); later runs start in seconds.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

PORT="${PORT:-8000}"
LLM_PORT="${LLM_PORT:-8081}"
RUN_DIR="$ROOT/.run"
mkdir -p "$RUN_DIR"

ensure_postgres
ensure_redis
ensure_venv "$ROOT/requirements.txt"
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@localhost:5432/coaching}"
ensure_database "$(basename "${DATABASE_URL%%\?*}")"

pids=()
cleanup() {
  trap - EXIT INT TERM
  say "stopping"
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
  local name="$1" log="$2"
  shift 2
  while true; do
    "$@" >>"$log" 2>&1 && status=0 || status=$?
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
  ensure_embedded_llm
  # A CPU model serves one request at a time: give each turn room to finish.
  export COACHING_TURN_DEADLINE_S="${COACHING_TURN_DEADLINE_S:-600}"
  say "starting the embedded model server (llama.cpp, SmolLM2-135M) on port $LLM_PORT"
  "$PY" -m agents.llm.embedded --port "$LLM_PORT" >"$RUN_DIR/llm.log" 2>&1 &
  pids+=($!)
  wait_http "http://127.0.0.1:$LLM_PORT/v1/models" 120 "The model server"
fi

say "migrating the database and collecting static files"
"$PY" manage.py migrate --noinput >/dev/null
"$PY" manage.py collectstatic --noinput >/dev/null
if [ -z "${COACHING_LLM_BASE_URL:-}" ]; then
  "$PY" manage.py endpoint_configure embedded --kind llamacpp --base-url "http://127.0.0.1:$LLM_PORT/v1" \
    --model smollm2-135m-instruct --max-concurrency 1 --read-timeout 300 --agents all
else
  "$PY" manage.py endpoint_configure "${COACHING_LLM_NAME:-default}" --kind "${COACHING_LLM_KIND:-vllm}" \
    --base-url "$COACHING_LLM_BASE_URL" --model "${COACHING_LLM_MODEL:?set COACHING_LLM_MODEL to the served model id}" \
    --api-key-env "${COACHING_LLM_API_KEY_ENV:-}" --agents all
fi
"$PY" manage.py check --fail-level ERROR >/dev/null

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
supervise "Daphne" "$RUN_DIR/web.log" "$VENV/bin/daphne" -b 127.0.0.1 -p "$PORT" coaching_site.asgi:application &
pids+=($!)
wait_http "http://127.0.0.1:$PORT/healthz" 60 "Daphne"

"$PY" manage.py seed_demo --base-url "http://127.0.0.1:$PORT"
say "running; logs in .run/ (web.log, worker.log, beat.log, llm.log). Ctrl-C stops everything."
# The worker and Daphne are restarted by their supervise loops; only the model server's exit ends the run.
wait -n "${pids[@]}"
die "a process exited; see the logs in .run/"
