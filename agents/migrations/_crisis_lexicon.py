"""Shared by the migrations that seed the crisis lexicon (the migration loader skips modules whose
name starts with an underscore)."""

from typing import Any


def add_patterns(CrisisPattern: Any, patterns: dict[str, dict[str, list[str]]], note: str) -> None:
    """Add a batch once (marked by `note`), only where (locale, pattern) is missing: an operator's
    edit or deletion of a seeded row is not undone."""
    if CrisisPattern.objects.filter(note=note).exists():
        return
    present = set(CrisisPattern.objects.values_list("locale", "pattern"))
    CrisisPattern.objects.bulk_create(
        CrisisPattern(locale=locale, pattern=pattern, category=category, note=note)
        for locale, categories in patterns.items()
        for category, rows in categories.items()
        for pattern in dict.fromkeys(rows)
        if (locale, pattern) not in present
    )


def replace_patterns(CrisisPattern: Any, replaced: dict[tuple[str, str], str]) -> None:
    """Narrow seeded patterns in place; one an operator already changed is left alone."""
    for (locale, old), new in replaced.items():
        if not CrisisPattern.objects.filter(locale=locale, pattern=new).exists():
            CrisisPattern.objects.filter(locale=locale, pattern=old).update(pattern=new)
