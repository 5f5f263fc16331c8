"""How operator actions fail: PromptOpError carries a message fit to show the operator, and
short_error puts any exception in one line for a page or a stored job."""

from __future__ import annotations


class PromptOpError(Exception):
    """An operator action that cannot be done, with a message fit to show them."""


def short_error(exc: BaseException) -> str:
    text = f"{getattr(exc, 'code', type(exc).__name__)}: {exc}"
    return text if len(text) <= 300 else text[:300] + "…"
