"""Crisis lexicon: three batch-4 patterns narrowed where they took everyday lines of the German and
French training messages (agents/safety_data/written_de_fr.tsv): a bungee jump from a high bridge,
a climbing rope, a video game's jump. Same rule as every seed: a row an operator changed is kept.
"""

from django.db import migrations

from agents.migrations._crisis_lexicon import replace_patterns

REPLACED = {
    ("de", r"\b(hochste|hohe)n? (brucke|brucken)\b"): r"\b(welche|wo|gibt es)\b.{0,30}\b(hochste|hohe)n? (brucke|brucken)\b",
    ("fr", r"\bachete une corde\b"): r"\bachete une corde\b(?! (d'escalade|a sauter|de guitare|pour (le|la|mon|ma|l')))",
    ("fr", r"\bsauter (du|d'un|depuis le|de la|du haut du) (pont|toit|immeuble|falaise)\b"): (
        r"(?<!il faut )(?<!jeu )\bsauter (du|d'un|depuis le|de la|du haut du) (pont|toit|immeuble|falaise)\b"
    ),
}


def narrow(apps, schema_editor):
    replace_patterns(apps.get_model("agents", "CrisisPattern"), REPLACED)


class Migration(migrations.Migration):
    dependencies = [("agents", "0020_crisis_patterns_batch_4")]
    operations = [migrations.RunPython(narrow, migrations.RunPython.noop)]
