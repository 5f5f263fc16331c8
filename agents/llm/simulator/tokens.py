"""The simulated tokenizer and chat template.

Deterministic and model-free. A token is one word of at most 12 word characters, or one
punctuation character, each with its leading whitespace; trailing whitespace is its own token.
Concatenating the pieces reproduces the text exactly, which is also how streamed content is
chunked. Token ids are a CRC32 of the piece.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from typing import Any

MAX_MODEL_LEN = 32768

_TOKEN_RE = re.compile(r"\s*\w{1,12}|\s*[^\w\s]|\s+")


def token_pieces(text: str) -> list[str]:
    """Split text into token strings whose concatenation is exactly ``text``."""
    return _TOKEN_RE.findall(text)


def tokenize(text: str) -> list[int]:
    return [zlib.crc32(piece.encode()) % 50_000 + 1_000 for piece in token_pieces(text)]


def messages_to_text(messages: list[Any]) -> str:
    """The simulated chat template; prompt_tokens counts the tokens of this."""
    parts: list[str] = []
    for message in messages:
        message = message if isinstance(message, dict) else {}
        content = message.get("content")
        if isinstance(content, list):  # multi-part content: keep the text parts
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(f"<|{message.get('role', '')}|>\n{content or ''}\n")
    return "".join(parts) + "<|assistant|>\n"


def messages_sha(messages: Any) -> str:
    """sha256 of the canonical JSON of the messages, as recorded in the call log."""
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
