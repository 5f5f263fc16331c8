"""A starting crisis lexicon in English, German, French and Spanish. Operators extend it in admin;
this never overwrites: a locale that already has patterns is left alone."""

from django.db import migrations

PATTERNS = {
    "en": [
        r"\bkill(ing)? my ?self\b",
        r"\bsuicid",
        r"\bend (it all|my life|things)\b",
        r"\b(want|wish|going) to die\b",
        r"\bdon'?t want to (live|be alive|wake up)\b",
        r"\bno (reason|point) (to|in) (live|living|go(ing)? on)\b",
        r"\bbetter off dead\b",
        r"\btake my (own )?life\b",
        r"\bself[- ]?harm",
        r"\b(hurt(ing)?|cut(ting)?|harm(ing)?) my ?self\b",
        r"\boverdos(e|ing)\b",
        r"\bcan'?t go on (any ?more|living)\b",
    ],
    "de": [
        r"\bumbringen\b",
        r"\bsuizid",
        r"\bselbstmord",
        r"\bnicht mehr leben\b",
        r"\bsterben (will|möchte)\b",
        r"\bmir das leben nehmen\b",
        r"\bmich (selbst )?(verletzen|ritzen)\b",
        r"\bselbstverletz",
    ],
    "fr": [
        r"\bme suicider\b",
        r"\bsuicid",
        r"\bme tuer\b",
        r"\ben finir\b",
        r"\bplus envie de vivre\b",
        r"\bveux mourir\b",
        r"\bme faire du mal\b",
        r"\bm'automutiler\b",
    ],
    "es": [
        r"\bsuicid",
        r"\bmatarme\b",
        r"\bquitarme la vida\b",
        r"\bno quiero (vivir|seguir viviendo)\b",
        r"\bquiero morir(me)?\b",
        r"\bhacerme daño\b",
        r"\bacabar con todo\b",
        r"\bautolesi",
    ],
}


def seed(apps, schema_editor):
    CrisisPattern = apps.get_model("agents", "CrisisPattern")
    present = set(CrisisPattern.objects.values_list("locale", flat=True))
    for locale, patterns in PATTERNS.items():
        if locale not in present:
            CrisisPattern.objects.bulk_create(CrisisPattern(locale=locale, pattern=p) for p in patterns)


class Migration(migrations.Migration):
    dependencies = [("agents", "0006_crisis_patterns")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
