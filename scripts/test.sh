#!/usr/bin/env bash
# Install everything and run every check: ruff, mypy, migrations, then the whole pytest suite
# (integration tests with real Celery and Daphne processes, and the real-model slow tests).
# Extra arguments go to pytest, e.g. `scripts/test.sh -m "not slow"`.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

ensure_postgres
ensure_redis
ensure_venv
ensure_engine
ensure_chromium
ensure_safety_models
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@localhost:5432/coaching}"
export DJANGO_SETTINGS_MODULE=coaching_site.settings_test

say "ruff"
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
say "mypy"
# Its cache outside the repo too (mypy checks each file's hash against it): a fresh clone's
# mypy takes ~4 s instead of ~1 minute.
MYPY_CACHE_DIR="$CACHE_DIR/mypy" "$VENV/bin/mypy" .
say "import contracts (lint-imports: no circle of imports, one direction between layers)"
"$VENV/bin/lint-imports" --no-cache
say "migrations are up to date"
# No connection pool for this one-shot check: it only peeks at the (maybe missing) app database,
# and a pool would retry that connection for its whole timeout. On a fresh machine that database
# does not exist yet (`make run` creates it): Django's warning about it is silenced, the check of
# the models against the migration files is not.
DATABASE_POOL_MAX_SIZE=0 "$PY" -W "ignore:Got an error checking a consistent migration history:RuntimeWarning" \
  manage.py makemigrations --check --dry-run >/dev/null \
  || die "models changed without a migration: run manage.py makemigrations"
# pytest's exit status, with "no tests collected" (5) as a failure.
checked() {
  local status=0
  "$@" || status=$?
  if [ "$status" -eq 5 ]; then die "pytest collected no tests"; fi
  return "$status"
}

if [ "$#" -gt 0 ]; then
  say "pytest $*"
  checked "$PY" -m pytest "$@"
  exit
fi

# The whole suite as two pytest runs side by side, split by what keeps them busy. The tests that
# start real processes (Daphne, Celery workers, Chromium: marked integration or browser) mostly
# wait on them; the in-process tests and the real-model tests (slow: the CPU engine) keep a core
# busy. As one run (20.5 minutes for the whole command on this two-core machine) the CPU was
# three quarters idle over the last six minutes, mostly the first kind; side by side, 11-12.5. The background run
# has its own test database (test_coaching_inproc) and Redis databases (4-7), so neither run's
# stacks take or flush the other's tasks (the benchmark's smoke test, which looks for a free
# block, then takes 12-15), and only the foreground run keeps pytest's cache (--lf).
IN_PROCESS="slow or not (integration or browser)"
mkdir -p "$ROOT/test-output"
IN_PROCESS_LOG="$ROOT/test-output/pytest-in-process.log"
say "pytest, the in-process and real-model tests in the background (-m '$IN_PROCESS'): test-output/pytest-in-process.log, shown once the first run ends"
DATABASE_URL="${DATABASE_URL%/*}/coaching_inproc" REDIS_DB_BASE=4 \
  "$PY" -m pytest -m "$IN_PROCESS" -p no:cacheprovider >"$IN_PROCESS_LOG" 2>&1 &
in_process_pid=$!
# Stopped with this script (pytest's fixtures then stop the model server and stacks they started).
# Ctrl-C reaches the foreground run only (a background job ignores it): end here once it has
# stopped, rather than go on to follow the background run.
trap 'kill -TERM "$in_process_pid" 2>/dev/null || true' EXIT
trap 'exit 130' INT

say "pytest, the tests that start processes (-m 'not ($IN_PROCESS)')"
processes=0
checked "$PY" -m pytest -m "not ($IN_PROCESS)" || processes=$?

say "pytest, the in-process and real-model tests (run beside the others; followed until they end)"
tail -n +1 -f --pid="$in_process_pid" "$IN_PROCESS_LOG"
in_process=0
checked wait "$in_process_pid" || in_process=$?
trap - EXIT
if [ "$processes" -ne 0 ] || [ "$in_process" -ne 0 ]; then
  die "pytest failed: the tests that start processes exited $processes, the in-process and real-model tests $in_process"
fi
