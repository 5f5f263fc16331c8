"""Crisis lexicon, batch 6: German subordinate clauses, where the modal verb comes last.

"Ich will sterben" is matched by batch 3's phrase (the wish, then the verb); in a subordinate
clause German puts the modal at the end: "...und ich dachte die ganze Zeit, dass ich mich
umbringen will", "weil ich nicht mehr leben möchte". There only the one-word pattern "umbringen"
matched, and a one-word pattern does not count in a message that talks about the subject (a
course on prevention, an article, a friend), so the coachee's own words got no card. Not "werde"
("dass ich irgendwann sterben werde" is talk about mortality) nor "wollte" (the past, as batch 3's
phrase leaves it out); not "vor Scham", "vor Lachen" or "fast" (a figure of speech).

Same seeding rules as every batch: added where (locale, pattern) is new, an operator's edit kept.
"""

from django.db import migrations

from agents.migrations._crisis_lexicon import add_patterns

SEEDED_NOTE = "default lexicon, batch 6 (migration 0029)"

PATTERNS: dict[str, dict[str, list[str]]] = {
    "de": {
        "suicide": [
            r"\bich\b(?!.{0,40}\b(vor (scham|lachen|langeweile|peinlichkeit|angst|hunger|durst|mudigkeit)|fast)\b)"
            r"( \w+){0,4} (sterben|tot sein|nicht mehr leben|mich (selbst )?umbringen|mir das leben nehmen|"
            r"mein leben beenden) (will|mochte|soll|sollte|muss)\b",
        ],
    },
}


def seed(apps, schema_editor):
    add_patterns(apps.get_model("agents", "CrisisPattern"), PATTERNS, SEEDED_NOTE)


def unseed(apps, schema_editor):
    apps.get_model("agents", "CrisisPattern").objects.filter(note=SEEDED_NOTE).delete()


class Migration(migrations.Migration):
    dependencies = [("agents", "0028_crisis_patterns_batch_5")]
    operations = [migrations.RunPython(seed, unseed)]
