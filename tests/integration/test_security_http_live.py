"""Finding 5 of the security probe (issue 20) through Daphne: NUL in the admin autocomplete's
term is refused with a 400, not a 500. The in-process half (every page and admin text field, the
test client) is tests/unit/test_security_http.py."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from django.urls import reverse

from tests.support.people import make_coach
from tests.support.stack import LiveStack, login_cookie

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def test_the_autocomplete_nul_is_a_400_on_the_live_stack(seeded_tx: None, live_stack: LiveStack) -> None:
    coach = make_coach("live_coach")
    cookie = login_cookie(coach.get_username(), "pw-for-tests-1")
    url = (
        f"{live_stack.http_url}{reverse('admin:autocomplete')}"
        "?app_label=agents&model_name=annotation&field_name=turn&term=%00"
    )
    request = urllib.request.Request(url, headers={"Cookie": cookie})  # noqa: S310 (the local stack)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)  # noqa: S310
    assert refused.value.code == 400
