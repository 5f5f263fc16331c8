"""Tests over real processes: Daphne and Celery workers started for the test, killed or restarted by it."""
