"""Per-address limits on the account pages, counted in the Redis cache like the per-user ones.

Sign-ups: every POST from one address counts, successful or not, in a fixed window; every
per-user limit is only worth as much as new accounts are hard to make. Logins: django-axes locks
a username from an address after a few failures; this counts failures from an address across
all usernames, so a few passwords tried over many usernames are stopped too.
"""

from __future__ import annotations

import time

from axes.helpers import get_client_ip_address
from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest


def address_of(request: HttpRequest) -> str:
    # The address django-axes uses (django-ipware, REMOTE_ADDR unless proxies are configured).
    return str(get_client_ip_address(request) or "unknown")


def _key(kind: str, address: str, window_s: int) -> str:
    return f"coaching:throttle:{kind}:{address}:{int(time.time() // window_s)}"


def _count(kind: str, address: str, window_s: int) -> int:
    return int(cache.get(_key(kind, address, window_s), 0))


def _add(kind: str, address: str, window_s: int) -> int:
    key = _key(kind, address, window_s)
    cache.add(key, 0, timeout=window_s * 2)
    return int(cache.incr(key))


def signup_allowed(request: HttpRequest) -> bool:
    """Count this sign-up attempt; False once the address is over its limit in this window."""
    window = settings.COACHING_SIGNUP_WINDOW_S
    return _add("signup", address_of(request), window) <= settings.COACHING_SIGNUPS_PER_ADDRESS


def login_blocked(request: HttpRequest) -> bool:
    """Has this address failed too many logins (any usernames) in this window?"""
    window = settings.COACHING_LOGIN_ADDRESS_WINDOW_S
    return _count("login", address_of(request), window) >= settings.COACHING_LOGIN_FAILURES_PER_ADDRESS


def login_failed(request: HttpRequest) -> None:
    _add("login", address_of(request), settings.COACHING_LOGIN_ADDRESS_WINDOW_S)


def retry_after_s(window_s: int) -> int:
    return int(window_s - time.time() % window_s) + 1


def reset(address: str) -> None:
    """Forget this window's counts for an address (an operator unblocking it; tests)."""
    cache.delete_many(
        [
            _key("signup", address, settings.COACHING_SIGNUP_WINDOW_S),
            _key("login", address, settings.COACHING_LOGIN_ADDRESS_WINDOW_S),
        ]
    )
