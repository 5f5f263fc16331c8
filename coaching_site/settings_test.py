"""Settings for the test suite: the real services, on their own Redis databases.

Defaults are set in the environment before the main settings read it, so that the
Celery worker and Daphne processes that integration tests start see the same values.
"""

import os

os.environ.setdefault("REDIS_DB_BASE", "8")  # 8-11: never the running app's 0-3
os.environ.setdefault("DJANGO_STATIC_MANIFEST", "0")
os.environ.setdefault("COACHING_LLM_RETRY_BACKOFF_S", "0.05")
os.environ.setdefault("DJANGO_SECRET_KEY", "test-only-secret-key-not-for-production-use-0123456789")

from coaching_site.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
# Serve static files straight from the source folders: tests run without collectstatic.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
