"""Default crisis resources for the locales the crisis lexicon covers. Operators edit them in admin;
this never overwrites: a locale that already has resources is left alone."""

from django.db import migrations

# (locale, order, name, contact, url, description)
RESOURCES = [
    ("en", 0, "Emergency services", "911 (US, Canada) · 999 (UK) · 112 (EU)", "", "If you are in danger right now."),
    ("en", 1, "988 Suicide & Crisis Lifeline (US)", "Call or text 988", "https://988lifeline.org", "Free, 24/7."),
    ("en", 2, "Samaritans (UK & Ireland)", "116 123", "https://www.samaritans.org", "Free, 24/7."),
    ("en", 3, "Find a helpline in your country", "", "https://findahelpline.com", "Worldwide directory."),
    ("de", 0, "Notruf", "112", "", "Wenn du jetzt in Gefahr bist."),
    ("de", 1, "TelefonSeelsorge", "0800 111 0 111 · 0800 111 0 222", "https://www.telefonseelsorge.de", "Kostenlos, rund um die Uhr."),
    ("fr", 0, "Urgences", "112 · 15", "", "Si vous êtes en danger maintenant."),
    ("fr", 1, "Numéro national de prévention du suicide", "3114", "https://3114.fr", "Gratuit, 24h/24."),
    ("fr", 2, "SOS Amitié", "09 72 39 40 50", "https://www.sos-amitie.com", "Écoute 24h/24."),
    ("es", 0, "Emergencias", "112", "", "Si estás en peligro ahora."),
    ("es", 1, "Línea 024 de atención a la conducta suicida", "024", "", "Gratuita, 24 horas."),
    ("es", 2, "Teléfono de la Esperanza", "717 003 717", "https://telefonodelaesperanza.org", "24 horas."),
]


def seed(apps, schema_editor):
    CrisisResource = apps.get_model("agents", "CrisisResource")
    present = set(CrisisResource.objects.values_list("locale", flat=True))
    for locale, order, name, contact, url, description in RESOURCES:
        if locale not in present:
            CrisisResource.objects.create(
                locale=locale, order=order, name=name, contact=contact, url=url, description=description
            )


class Migration(migrations.Migration):
    dependencies = [("agents", "0003_crisis_resources_and_memory_edits")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
