#!/usr/bin/env bash
# The performance benchmark: the real stack (Daphne, a Celery worker, PostgreSQL, Redis) against
# the simulated model server at 1 to 50 coachees, then one turn on the embedded real model.
# Several minutes. Extra arguments go to `python -m benchmarks.run` (e.g. --no-real, --concurrency 5).
# Results: the table on stdout, docs/bench/results-<date>-<commit>.{json,md}; logs in test-output/bench/.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

ensure_postgres
ensure_redis
ensure_venv
# Its own database and Redis databases (12-15): never the app's (0-3) or the tests' (8-11).
export DATABASE_URL="${BENCH_DATABASE_URL:-postgres://postgres@localhost:5432/coaching_bench}"
export REDIS_DB_BASE=12 DJANGO_SETTINGS_MODULE=coaching_site.settings DJANGO_STATIC_MANIFEST=0
ensure_database "$(basename "${DATABASE_URL%%\?*}")"

real=(--real)
for arg in "$@"; do
  if [ "$arg" = "--no-real" ]; then real=(); fi
done
if [ "${#real[@]}" -gt 0 ]; then ensure_engine; fi

say "migrating $(basename "$DATABASE_URL")"
"$PY" manage.py migrate --noinput >/dev/null
say "benchmark (several minutes; the machine should be otherwise idle for clean figures)"
exec "$PY" -m benchmarks.run --database-url "$DATABASE_URL" --redis-db-base "$REDIS_DB_BASE" "${real[@]}" "$@"
