#!/usr/bin/env bash
# Install everything and run every check: ruff, mypy, migrations, then the whole pytest suite
# (integration tests with real Celery and Daphne processes, and the real-model slow tests).
# Extra arguments go to pytest, e.g. `scripts/test.sh -m "not slow"`.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

ensure_postgres
ensure_redis
ensure_venv "$ROOT/requirements.txt" "$ROOT/requirements-dev.txt"
ensure_engine
ensure_chromium
ensure_crisis_model
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@localhost:5432/coaching}"
export DJANGO_SETTINGS_MODULE=coaching_site.settings_test

say "ruff"
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
say "mypy"
"$VENV/bin/mypy" .
say "import contracts (lint-imports: no circle of imports, one direction between layers)"
"$VENV/bin/lint-imports" --no-cache
say "migrations are up to date"
# No connection pool for this one-shot check: it only peeks at the (maybe missing) app database,
# and a pool would retry that connection for its whole timeout.
DATABASE_POOL_MAX_SIZE=0 "$PY" manage.py makemigrations --check --dry-run >/dev/null \
  || die "models changed without a migration: run manage.py makemigrations"
say "pytest"
set +e
"$PY" -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then die "pytest collected no tests"; fi
exit "$status"
