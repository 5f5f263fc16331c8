"""Text the database can store: one rule for the socket, the pages and the admin.

PostgreSQL's text and jsonb refuse NUL (U+0000); lone surrogates (U+D800-U+DFFF, which JSON's
`\\ud800` escapes and surrogateescape-decoded bytes produce) cannot be encoded as UTF-8. Every
other code point, control characters included, is stored as sent. Such text is refused with a
reason, never cleaned: a changed message would be one the coachee did not write.
"""

from __future__ import annotations

import re

UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable_problem(text: str) -> str | None:
    """Why `text` cannot be stored, or None when it can."""
    found = UNSTORABLE.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "contains a NUL character (U+0000), which cannot be stored"
    return f"contains an unpaired surrogate (U+{ord(found.group()):04X}), which is not valid Unicode text"
