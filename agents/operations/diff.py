"""What changes between two prompt texts: a line-by-line diff, rendered as escaped table rows."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from agents.models import PromptVersion


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "hunk", "add", "del", "same"
    text: str
    old_no: int | None = None
    new_no: int | None = None

    @property
    def sign(self) -> str:
        return {"add": "+", "del": "-", "same": " "}.get(self.kind, "")


@dataclass(frozen=True)
class PromptDiff:
    old_label: str
    new_label: str
    lines: list[DiffLine]
    added: int
    removed: int

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)

    @property
    def html(self) -> SafeString:
        """The diff as table rows; every piece of prompt text is escaped."""
        if not self.lines:
            return format_html('<tr class="diff-same"><td colspan="4">{}</td></tr>', "The texts are identical.")
        return format_html_join(
            "\n",
            '<tr class="diff-{}"><td class="ln">{}</td><td class="ln">{}</td><td class="sign">{}</td>'
            '<td class="txt">{}</td></tr>',
            ((line.kind, line.old_no or "", line.new_no or "", line.sign, line.text) for line in self.lines),
        )


def body_diff(old: str, new: str, *, old_label: str = "old", new_label: str = "new", context: int = 3) -> PromptDiff:
    """A unified diff of two prompt texts, line by line, with line numbers on both sides."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    lines: list[DiffLine] = []
    added = removed = 0
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        lines.append(
            DiffLine("hunk", f"@@ -{first[1] + 1},{last[2] - first[1]} +{first[3] + 1},{last[4] - first[3]} @@")
        )
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [DiffLine("same", old_lines[i], i + 1, j1 + (i - i1) + 1) for i in range(i1, i2)]
                continue
            if tag in ("replace", "delete"):
                lines += [DiffLine("del", old_lines[i], old_no=i + 1) for i in range(i1, i2)]
                removed += i2 - i1
            if tag in ("replace", "insert"):
                lines += [DiffLine("add", new_lines[j], new_no=j + 1) for j in range(j1, j2)]
                added += j2 - j1
    return PromptDiff(old_label, new_label, lines, added, removed)


def version_label(version: PromptVersion) -> str:
    return f"{version.agent} v{version.version} ({version.status})"


def prompt_diff(a: PromptVersion | None, b: PromptVersion) -> PromptDiff:
    """What changes from version a (usually the active one) to version b."""
    if a is None:
        return body_diff("", b.body, old_label="(no version)", new_label=version_label(b))
    return body_diff(a.body, b.body, old_label=version_label(a), new_label=version_label(b))
