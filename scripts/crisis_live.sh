#!/usr/bin/env bash
# Every crisis message of the evaluation set over the WebSocket of a live stack (Daphne and a
# Celery worker, every model endpoint down): the card within a second, p50 and max printed.
# Needs PostgreSQL and Redis as for the tests: DATABASE_URL, REDIS_DB_BASE.
set -euo pipefail
cd "$(dirname "$0")/.."
CRISIS_LIVE_ALL=1 DJANGO_SETTINGS_MODULE="${DJANGO_SETTINGS_MODULE:-coaching_site.settings_test}" \
  .venv/bin/python -m pytest -q -s tests/integration/test_crisis_set.py \
  -k test_evaluation_crisis_messages_get_the_card_in_their_language_within_a_second -m "not slow and not browser"
