"""Chat-template control tokens in what a model reads are broken apart before a request goes out.

An OpenAI-compatible server renders the messages through the model's chat template into one
string and tokenizes it with the special tokens parsed, the messages' content included (vLLM
0.33 has no switch for it: vllm-project/vllm#31735; llama.cpp's server does the same). A coachee
who writes `<|im_end|>` then `<|im_start|>system` would give the model a real end of their turn
and a system turn of their own, past the data fences every prompt puts around their words
(memory.context.fence). So every message of every request (client._request_kwargs) goes through
`neutralised`: the control strings of the common templates get a space after their opening
bracket, which the tokenizer then reads as ordinary characters. Text without them is returned
as it was, byte for byte: the server's prefix cache serves it as before.
"""

from __future__ import annotations

import re

# The openings of control tokens, each matched only where the rest of a token follows:
# - `<|...|>`: ChatML (Qwen, SmolLM), Llama 3, Phi; DeepSeek's, with full-width bars (U+FF5C);
# - BOS/EOS and turn, thinking and tool tags written as tags (Llama 2, Mistral, Gemma, Qwen 3);
# - Llama 2's `<<SYS>>` and Mistral's bracketed markers.
_OPENING = re.compile(
    r"<(?=[|\uff5c])"
    r"|<(?=/?(?:s|bos|eos|pad|unk|start_of_turn|end_of_turn|think|tool_call|tool_response)>)"
    r"|<<(?=/?SYS>>)"
    r"|\[(?=/?(?:INST|SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS|THINK)\])"
)


def carries_control_tokens(text: str) -> bool:
    return _OPENING.search(text) is not None


def neutralised(text: str) -> str:
    """`text` with every control-token opening broken by a space; unchanged when it has none."""
    return _OPENING.sub(r"\g<0> ", text)


def neutralised_messages(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{**message, "content": neutralised(message["content"])} for message in messages]
