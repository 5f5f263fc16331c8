"""Which environment variables a model endpoint may name as its API key.

The key is sent to the endpoint's server in the Authorization header, so the name decides what
leaves the machine. Only names matching COACHING_LLM_KEY_ENV_PATTERN (default
`COACHING_LLM_KEY_*`) are allowed, and never a variable the app itself reads, whatever the
pattern says: checked when an endpoint is saved (the model's validator, the admin form, the
shell command) and again before every request (client.EndpointSpec.api_key).
"""

from __future__ import annotations

import fnmatch
import re

from django.conf import settings
from django.core.exceptions import ValidationError

# Variables of the app and its services: a pattern set too wide (`*`) still cannot reach them.
APP_VARIABLES = re.compile(
    r"^(DATABASE_|DJANGO_|REDIS_|CELERY_|EMAIL_|AXES_|PG|AWS_|SECRET|COACHING_(?!LLM_KEY_))|(PASSWORD|SECRET_KEY)$"
)
NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


def api_key_env_problem(name: str) -> str | None:
    """Why `name` may not be an endpoint's API-key variable, or None when it may ("" = no key)."""
    if not name:
        return None
    pattern = settings.COACHING_LLM_KEY_ENV_PATTERN
    if not NAME.match(name):
        return f"{name!r} is not an environment variable name (capitals, digits and _)"
    if APP_VARIABLES.search(name):
        return f"{name} is one of the app's own settings; keys must be in a variable named {pattern}"
    if not fnmatch.fnmatchcase(name, pattern):
        return f"{name} does not match {pattern}, the pattern API-key variables must match"
    return None


def validate_api_key_env(value: str) -> None:
    """Model field validator (also run by the admin form and the shell command)."""
    problem = api_key_env_problem(value)
    if problem is not None:
        raise ValidationError(f"Not allowed: {problem}.", code="api_key_env")
