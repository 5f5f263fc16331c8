"""Refuse requests carrying text the database cannot store, before any view reads them.

PostgreSQL refuses NUL in text (and `\\u0000` in jsonb); a lone surrogate cannot be encoded to
UTF-8 at all. Such a value in a search box, an autocomplete `term`, a form field, an object id
in the path or a cookie otherwise reaches a query and ends as a 500. Invalid UTF-8 in the query
string or a urlencoded form is refused too: Django would decode it into replacement characters,
silently changing what was sent. One rule for every page, admin included: a 400 that says why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from urllib.parse import unquote_to_bytes

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest

from agents.text import unstorable_problem

FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"


def _raw_problem(raw: bytes, where: str) -> str | None:
    """Percent-encoded text (a query string or a urlencoded body) that is not clean UTF-8."""
    try:
        text = unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        return f"the {where} is not valid UTF-8"
    problem = unstorable_problem(text)
    return f"the {where} {problem}" if problem else None


def _values_problem(values: Iterable[tuple[str, str]], where: str) -> str | None:
    for key, value in values:
        problem = unstorable_problem(key) or unstorable_problem(value)
        if problem:
            return f"a {where} {problem}"
    return None


def request_text_problem(request: HttpRequest) -> str | None:
    """Why this request's text cannot be taken, or None."""
    problem = unstorable_problem(request.path)
    if problem:
        return f"the address {problem}"
    problem = _raw_problem(request.META.get("QUERY_STRING", "").encode("latin-1", "replace"), "query string")
    if problem:
        return problem
    problem = _values_problem(request.COOKIES.items(), "cookie")
    if problem:
        return problem
    if request.method == "POST":
        if request.content_type == FORM_CONTENT_TYPE:
            return _raw_problem(request.body, "form")
        # Multipart forms: Django decoded the fields already; NUL and surrogates survive that.
        return _values_problem(((k, v) for k, vs in request.POST.lists() for v in vs), "form field")
    return None


class RefuseUnstorableTextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        problem = request_text_problem(request)
        if problem is not None:
            return HttpResponseBadRequest(f"Bad request: {problem}.".encode(), content_type="text/plain; charset=utf-8")
        return self.get_response(request)
