"""Production settings pass Django's deployment checks."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.stack import ROOT


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


def test_collected_page_modules_import_each_other_by_hashed_name(tmp_path: Path) -> None:
    """After collectstatic with the production storage, every `import … from "./x.js"` in the
    chat page's modules names a hashed file that exists: a browser never pairs a new main.js
    with a module cached from the release before."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "coaching_site.settings", "DJANGO_STATIC_ROOT": str(tmp_path)}
    env.update(DATABASE_POOL_MAX_SIZE="0", DJANGO_STATIC_MANIFEST="1")  # the test settings turn hashing off
    result = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    hashed = [p for p in (tmp_path / "chat").glob("*.*.js") if re.fullmatch(r"\w+\.[0-9a-f]{12}\.js", p.name)]
    assert any(p.name.startswith("main.") for p in hashed)
    imports = [name for p in hashed for name in re.findall(r'from "\./([^"]+)"', p.read_text())]
    assert imports, "the chat page's modules import nothing: is main.js still a module?"
    for name in imports:
        assert re.fullmatch(r"\w+\.[0-9a-f]{12}\.js", name), f"{name} is imported by its plain name"
        assert (tmp_path / "chat" / name).exists()


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


def test_a_database_of_an_earlier_release_migrates(settings: Any) -> None:
    """An upgrade: migrations that add agents seed their configs and prompts, and the system
    checks (which require them) must not stop `migrate` from applying them."""
    import psycopg

    db = settings.DATABASES["default"]
    name = f"{db['NAME']}_upgrade"
    admin_url = f"postgresql://{db['USER']}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "coaching_site.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or 'localhost'}:{db['PORT'] or 5432}/{name}",
    }

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
        )

    try:
        earlier = manage("migrate", "agents", "0012", "--noinput")
        assert earlier.returncode == 0, earlier.stdout + earlier.stderr
        upgrade = manage("migrate", "--noinput")
        assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
        checked = manage("check", "--fail-level", "ERROR")
        assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
