"""Django settings, read from the environment in this one place, with local defaults.

Every variable is documented in README.md ("Configuration").
"""

import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


# Prometheus metrics on (default) or off: off, every recording call returns at once, the scrape
# path answers 404 and django-prometheus's middleware and database wrapper are left out (the
# benchmark compares both). The rest of the observability settings are near the end.
COACHING_METRICS = env_bool("COACHING_METRICS", True)


def database_from_url(url: str) -> dict[str, object]:
    parsed = urlparse(url)
    # At least a Celery worker's threads (-c 64 in the benchmark) plus a few: a thread keeps its
    # connection for the whole task (handing it back before each wait or model call cost a
    # health-check ping on the turn's critical path every time it was taken again).
    pool_max_size = env_int("DATABASE_POOL_MAX_SIZE", 80)
    return {
        # django-prometheus's wrapper of the same backend counts queries, errors and new connections.
        "ENGINE": "django_prometheus.db.backends.postgresql" if COACHING_METRICS else "django.db.backends.postgresql",
        "NAME": unquote(parsed.path.lstrip("/")),
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": parsed.hostname or "",
        "PORT": str(parsed.port or ""),
        # A connection pool per process (Django's psycopg_pool support). Celery 5.7 closes a
        # worker's connections after every task (celery#9824): without a pool each task paid a
        # new PostgreSQL backend (5-9 ms, on the turn's critical path at every stage); with it,
        # close() hands the connection back. Health checks: the pool pings before lending one.
        # A pool excludes persistent connections (CONN_MAX_AGE), which it replaces.
        # DATABASE_POOL_MAX_SIZE=0 turns it off (e.g. behind PgBouncer in transaction mode).
        # timeout: how long a thread waits for a connection (a busy pool or a server that is
        # down) before its request fails with an error.
        "CONN_MAX_AGE": 0 if pool_max_size else env_int("DATABASE_CONN_MAX_AGE", 60),
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": {"pool": {"min_size": 1, "max_size": pool_max_size, "timeout": 5.0}} if pool_max_size else {},
    }


DEBUG = env_bool("DJANGO_DEBUG", False)
# The "django-insecure-" prefix makes `check --deploy` refuse this development default.
SECRET_KEY = env_str("DJANGO_SECRET_KEY", "django-insecure-dev-only-key-set-DJANGO_SECRET_KEY-in-production")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")
# Origins (scheme, host and port, exactly) that may post forms and open the chat WebSocket besides
# the page's own: one list for both, so a cross-site page can do neither. The socket accepts its
# own origin (the Host it was asked on, with the scheme it came by) and these; nothing else.
# DJANGO_CSRF_TRUSTED_ORIGINS is the older name of the same variable.
TRUSTED_ORIGINS = env_list("DJANGO_TRUSTED_ORIGINS", os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", ""))
CSRF_TRUSTED_ORIGINS = TRUSTED_ORIGINS

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "axes",
    "csp",
    "agents",
    "planner",
]
if COACHING_METRICS:
    INSTALLED_APPS.append("django_prometheus")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Before anything reads the request: text the database cannot store (NUL, invalid UTF-8)
    # in a path, query, form or cookie is a 400, not a PostgreSQL error and a 500.
    "agents.middleware.RefuseUnstorableTextMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: it turns a locked-out login into a clear 429 page.
    "axes.middleware.AxesMiddleware",
]
if COACHING_METRICS:
    # HTTP requests by view, method and status, timed around every other middleware.
    MIDDLEWARE = [
        "django_prometheus.middleware.PrometheusBeforeMiddleware",
        *MIDDLEWARE,
        "django_prometheus.middleware.PrometheusAfterMiddleware",
    ]

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # refuses logins while locked out
    "django.contrib.auth.backends.ModelBackend",
]
# Login throttling: after AXES_FAILURE_LIMIT failures for one username from one address, that
# pair is locked out for the cool-off time. Counted in the Redis cache, so every Daphne process
# shares the count.
AXES_HANDLER = "axes.handlers.cache.AxesCacheHandler"
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = env_float("AXES_COOLOFF_MINUTES", 15.0) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# Across usernames too: failed logins from one address, whatever username each names, in a fixed
# window (agents/throttle.py, in the same Redis cache). Higher than the per-username limit, since
# people behind one NAT share an address; low enough that a few passwords tried across many
# usernames stop after this many.
COACHING_LOGIN_FAILURES_PER_ADDRESS = env_int("COACHING_LOGIN_FAILURES_PER_ADDRESS", 20)
COACHING_LOGIN_ADDRESS_WINDOW_S = env_int("COACHING_LOGIN_ADDRESS_WINDOW_S", 900)
# Sign-ups from one address (attempts, successful or not) in a fixed window: every per-user limit
# is only worth as much as new accounts are hard to make.
COACHING_SIGNUPS_PER_ADDRESS = env_int("COACHING_SIGNUPS_PER_ADDRESS", 5)
COACHING_SIGNUP_WINDOW_S = env_int("COACHING_SIGNUP_WINDOW_S", 3600)

ROOT_URLCONF = "coaching_site.urls"
ASGI_APPLICATION = "coaching_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": database_from_url(env_str("DATABASE_URL", "postgres://postgres@localhost:5432/coaching"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Redis holds three things in separate logical databases: the Celery broker, the Celery
# result backend (whose chord counter completes the trio without polling) and the channel
# layer. REDIS_DB_BASE lets tests run beside a running app without touching its data.
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379").rstrip("/")
REDIS_DB_BASE = env_int("REDIS_DB_BASE", 0)

CELERY_BROKER_URL = f"{REDIS_URL}/{REDIS_DB_BASE}"
CELERY_RESULT_BACKEND = f"{REDIS_URL}/{REDIS_DB_BASE + 1}"
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# LLM tasks are long and must survive a worker crash: acknowledge after the task ran,
# hand the message back when the worker dies, and take one message at a time.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Limits stay below the broker's visibility timeout so a slow task is killed before
# Redis would redeliver it to a second worker.
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 600)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 660)
# A task whose worker died (SIGKILL, power loss) is handed to another worker after this many
# seconds; the process-fault tests shorten it (with the limits above) to see it happen.
CELERY_VISIBILITY_TIMEOUT_S = env_int("CELERY_VISIBILITY_TIMEOUT_S", 900)
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, Any] = {"visibility_timeout": CELERY_VISIBILITY_TIMEOUT_S}
if env_str("CELERY_UNACKED_RESTORE_INTERVAL_S", ""):
    # How often a worker looks for such tasks (kombu's default sweep is ~100 s).
    CELERY_BROKER_TRANSPORT_OPTIONS |= {
        "unacked_restore_interval": env_int("CELERY_UNACKED_RESTORE_INTERVAL_S", 10),
        "unacked_restore_throttle": 1,
    }
CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_VISIBILITY_TIMEOUT_S}
# Chord header results must outlive the chord; 0 would mean "never expire" on some
# backends and hangs chords on others, so keep an explicit day.
CELERY_RESULT_EXPIRES = 86400
CELERY_TASK_ALWAYS_EAGER = False
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    "prune-raw-outputs": {"task": "coaching.prune_raw_outputs", "schedule": 6 * 3600.0},
    # Turns whose watchdog died with its process (Daphne or a worker) still get their fallback.
    "expire-overdue-turns": {"task": "coaching.expire_overdue_turns", "schedule": 30.0},
    # Ends sessions idle for COACHING_SESSION_IDLE_MINUTES and queues their summaries.
    "compact-idle-sessions": {"task": "coaching.sessions_compact_idle", "schedule": 300.0},
}

# The pub/sub layer by default: it delivered ~5x the messages per second of the core layer on
# 2 cores (2,942 vs 577 msg/s to 20 receivers, benchmark probe) because the core layer's receive
# makes four sequential Redis round trips per message. It delivers at most once, which the app
# already covers: every event that matters is persisted and replayed on resume.
# COACHING_CHANNEL_LAYER=core selects the core layer (with capacity and expiry).
if env_str("COACHING_CHANNEL_LAYER", "pubsub") == "core":
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [f"{REDIS_URL}/{REDIS_DB_BASE + 2}"], "capacity": 500, "expiry": 60},
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            # Pub/sub channels ignore Redis's logical databases: the prefix keeps an app, its
            # tests and the benchmark on one Redis from hearing each other's sessions.
            "CONFIG": {"hosts": [f"{REDIS_URL}/{REDIS_DB_BASE + 2}"], "prefix": f"coaching{REDIS_DB_BASE}"},
        }
    }

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": f"{REDIS_URL}/{REDIS_DB_BASE + 3}",
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat-home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Hashed, compressed names in production; plain files when no collectstatic ran (tests).
    "staticfiles": {
        "BACKEND": "coaching_site.storage.ModuleAwareStaticFilesStorage"
        if env_bool("DJANGO_STATIC_MANIFEST", True)
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# Content-Security-Policy (django-csp): scripts and connections only from this origin (the
# chat's WebSocket included), no plugins, no framing. Inline style attributes are allowed
# (admin and a few templates use them); inline scripts are not, and the app has none.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
if env_bool("DJANGO_SECURE", False):
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = 31536000
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- The coaching pipeline -------------------------------------------------------------
# A turn always ends within this many seconds of the user's message: the stages get
# fixed shares of it (see agents/deadlines.py) and a watchdog delivers a fallback after it.
COACHING_TURN_DEADLINE_S = env_float("COACHING_TURN_DEADLINE_S", 180.0)
# Coach tokens are relayed in batches: one channel-layer message per token saturates the
# layer near 600 msg/s on 2 cores; 40 ms keeps the stream smooth to the eye.
COACHING_COACH_DELTA_BATCH_MS = env_int("COACHING_COACH_DELTA_BATCH_MS", 40)
# How often the partial Coach text is saved, so a reconnecting client gets what exists so far.
COACHING_COACH_SNAPSHOT_S = env_float("COACHING_COACH_SNAPSHOT_S", 1.0)
# Threads of a Daphne process for its database calls (agents/db.py): one call waiting on a lock
# or a round trip no longer holds up every other coachee's. Each holds a pool connection while
# it runs, so keep it well under DATABASE_POOL_MAX_SIZE.
COACHING_DB_THREADS = env_int("COACHING_DB_THREADS", 8)
# Transient LLM errors (timeouts, 429, 5xx) are retried this many times, with backoff.
COACHING_LLM_MAX_RETRIES = env_int("COACHING_LLM_MAX_RETRIES", 2)
COACHING_LLM_RETRY_BACKOFF_S = env_float("COACHING_LLM_RETRY_BACKOFF_S", 0.5)
# Circuit breaker per endpoint: after this many consecutive health failures (timeouts,
# connection errors, 5xx) calls fail fast for the cooldown, then one probe tests the endpoint.
# 5 rides out a brief blip (one turn's retries) but stops a dead server costing every agent
# of every turn a full timeout; 30 s is a few turns, short enough to notice a recovery soon.
COACHING_LLM_BREAKER_THRESHOLD = env_int("COACHING_LLM_BREAKER_THRESHOLD", 5)
COACHING_LLM_BREAKER_COOLDOWN_S = env_float("COACHING_LLM_BREAKER_COOLDOWN_S", 30.0)
# The environment variables a model endpoint may name as its API key (shell-style pattern). Any
# other name is refused when the endpoint is saved and again before a request goes out, so no
# variable of the app itself (DATABASE_URL, DJANGO_SECRET_KEY, EMAIL_HOST_PASSWORD) can be sent.
COACHING_LLM_KEY_ENV_PATTERN = env_str("COACHING_LLM_KEY_ENV_PATTERN", "COACHING_LLM_KEY_*")
# Unit tests set this to False so no code path can reach a model by accident.
COACHING_LLM_ALLOW_REQUESTS = env_bool("COACHING_LLM_ALLOW_REQUESTS", True)
# The biggest accepted WebSocket frame and user message.
COACHING_MAX_FRAME_BYTES = env_int("COACHING_MAX_FRAME_BYTES", 16384)
COACHING_MAX_MESSAGE_CHARS = env_int("COACHING_MAX_MESSAGE_CHARS", 4000)
# Per-user limits, counted in Redis so every Daphne process shares them: messages (turns) a
# minute, and sockets open at once (tabs and devices).
COACHING_TURNS_PER_MINUTE = env_int("COACHING_TURNS_PER_MINUTE", 12)
# Raw model outputs and stored prompts (which quote the conversation) are pruned after this many
# days; parsed outputs, tokens and timings stay for review and statistics.
COACHING_RAW_RETENTION_DAYS = env_int("COACHING_RAW_RETENTION_DAYS", 30)
COACHING_MAX_SOCKETS_PER_USER = env_int("COACHING_MAX_SOCKETS_PER_USER", 8)
# A session nobody wrote in for this long is ended and summarised (compaction.py).
COACHING_SESSION_IDLE_MINUTES = env_int("COACHING_SESSION_IDLE_MINUTES", 60)
# Longest wait for one summarizer call (with its retries and repair).
COACHING_SUMMARY_TIMEOUT_S = env_float("COACHING_SUMMARY_TIMEOUT_S", 180.0)

# Crisis alerts to coaches go by email: the console in development (set EMAIL_BACKEND and
# EMAIL_HOST etc. for SMTP in production); the test runner swaps in the in-memory outbox.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
# An alert is sent right after the turn commits; a mail server that hangs must not hold it long.
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "coaching@localhost")
# Where coaches reach the admin: alert emails link to the turn's review page under it.
COACHING_SITE_URL = env_str("COACHING_SITE_URL", "http://localhost:8000").rstrip("/")

# --- Observability (agents/observability/) --------------------------------------------------
# COACHING_METRICS: see the top of this file.
# prometheus_client's multiprocess mode: every process of a host (Daphne, each Celery worker)
# writes its samples to files in this directory and one scrape adds them up. Set by the run
# script to a fresh directory per start (it must be emptied before the processes start). Empty:
# each process keeps its own samples and the scrape shows only the process that answers it.
# prometheus_client reads the variable itself, at import; this copy is what the app consults.
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR", "")
# Prometheus scrapes /metrics with "Authorization: Bearer <token>"; operators signed in to the
# admin may read it too. Empty: only signed-in operators (no anonymous scrape at all).
COACHING_METRICS_TOKEN = env_str("COACHING_METRICS_TOKEN", "")
# A separate scrape port (manage.py metrics_serve, for hosts that run only Celery workers):
# bound to this address, localhost unless an operator opens it.
COACHING_METRICS_ADDR = env_str("COACHING_METRICS_ADDR", "127.0.0.1")
COACHING_METRICS_PORT = env_int("COACHING_METRICS_PORT", 9464)
# OpenTelemetry traces in the GenAI conventions, exported over OTLP/HTTP when an endpoint is set
# (e.g. http://localhost:4318); off otherwise. Message text goes into spans only when
# COACHING_TRACE_CONTENT is on (it is the coachee's words: an operator's decision).
OTEL_EXPORTER_OTLP_ENDPOINT = env_str("OTEL_EXPORTER_OTLP_ENDPOINT", "")
OTEL_SERVICE_NAME = env_str("OTEL_SERVICE_NAME", "coaching")
COACHING_TRACE_CONTENT = env_bool("COACHING_TRACE_CONTENT", False)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {name: {"level": "WARNING"} for name in ("httpx", "httpx2", "openai")},
}
