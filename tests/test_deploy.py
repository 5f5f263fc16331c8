"""Production settings pass Django's deployment checks."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import ROOT


def test_check_deploy_passes_with_production_settings() -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "coaching_site.settings",
        "DJANGO_SECURE": "1",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(64),
        "DJANGO_ALLOWED_HOSTS": "coach.example.org",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_fails_with_the_development_key() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "coaching_site.settings", "DJANGO_SECURE": "1"}
    env.pop("DJANGO_SECRET_KEY", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0  # the check can fail: the default key is not fit for production


@pytest.mark.django_db
def test_pages_carry_a_content_security_policy(client: Any) -> None:
    policy = client.get("/accounts/login/")["Content-Security-Policy"]
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "object-src 'none'" in policy
    assert "unsafe-eval" not in policy
