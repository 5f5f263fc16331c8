"""Crisis lexicon, batch 7: hurting oneself, told with what it is for.

Self-harm is told with the act on one's own body and, as clinicians hear it, its function: to
feel something, to calm down, to punish oneself, until it bleeds, where no one sees. Either alone
is everyday talk (a cut while cooking; "I need to calm down"); the two together, within a few
words, are the warning sign, however the act is worded (burning with a lighter, scratching,
pricking with needles, hitting, biting). One concept in every language, written from the misses
of the development sets (`blind`, `probe`, `long`, `pieces`, `plans`: a line each was read, none
copied) and measured on a blind set written for the purpose before its first run
(docs/crisis-safety.md). Same seeding rules as every batch: added where (locale, pattern) is new,
an operator's edit kept.
"""

from django.db import migrations

from agents.migrations._crisis_lexicon import add_patterns

SEEDED_NOTE = "default lexicon, batch 7: self-harm with its purpose (migration 0031)"

WINDOW = r".{0,60}"

# The act on one's own body: the verb with the reflexive, or with one's own body part.
ACT = {
    "en": r"(cut|cutting|burn|burning|burned|burnt|scratch|scratching|scratched|hit|hitting|punch|punching|"
    r"punched|stab|stabbing|prick|pricking|pinch|pinching|bite|biting|hurt|hurting)"
    r" (my ?self|my (own )?(arms?|legs?|skin|wrists?|thighs?|hands?|fingers?|stomach|face|head))",
    "ru": r"(жг(у|ла|ал)|прижг\w*|прижига\w*|обжига\w*|царапа\w*|расцарапа\w*|режу|резала|резал|порезала|порезал|"
    r"бью себя|била себя|бил себя|колю себе|колола себе|щипа\w* себя|кусаю себя|кусала себя)",
    "de": r"(ritz\w*|schneid\w*|verbrenn\w*|kratz\w*|schlag\w*|stech\w*|beiss\w*|zwick\w*) (mich|mir)",
    "pt": r"(queim\w*[ -]me|me queim\w*|cort\w*[ -]me|me cort\w*|arranh\w*[ -]me|me arranh\w*|espet\w*|"
    r"belisc\w*[ -]me|me belisc\w*|machuc\w*[ -]me|me machuc\w*|magoei|bato em mim)",
    "fr": r"(me (brule|coupe|griffe|gratte|frappe|tape|pique|mords|pince|blesse)\w*|m.?entaille\w*|"
    r"me suis (encore |de nouveau )?(fait des entailles|brulee?|coupee?|griffee?|entaillee?|tapee?|frappee?|cognee?)|"
    r"me fais des entailles)",
    "es": r"(me (quemo|queme|corto|corte|rasguno|araño|arano|pincho|pinche|pego|golpeo|muerdo|lastimo|froto)|"
    r"quemarme|cortarme|rasgunarme|aranarme|pincharme|golpearme|lastimarme|hacerme dano)",
}
# What it is for, as it is told.
PURPOSE = {
    "en": r"(to feel (something|anything|real|alive)|feel something|as (a )?punishment|to punish my ?self|"
    r"calms? me( down)?|to calm (down|my ?self)|until (it|i) (bleeds?|bled)|till (it|i) (bleeds?|bled)|"
    r"no ?one (can |will )?sees?|nobody (can |will )?sees?|(only|one) way to stop (thinking|feeling))",
    "ru": r"(что ?то почувствовать|почувствовать хоть что|в наказание|наказ\w* себя|успокаива\w*|до крови|"
    r"пока не пош\w* кровь|никто не (видит|увидит)|единственн\w* способ (не думать|перестать думать))",
    "de": r"((etwas|irgendwas|was) zu (spuren|fuhlen)|zur strafe|(um )?mich zu bestrafen|beruhigt mich|"
    r"bis (es|ich) blute\w*|(keiner|niemand) (es )?sieht|einzige (weg|moglichkeit),? (nicht mehr )?(zu denken|abzuschalten))",
    "pt": r"((para|pra) sentir (alguma coisa|algo)|como (um )?castigo|(para|pra) me castigar|me acalma|"
    r"ate (sangrar|sair sangue|fazer sangue)|ninguem ve|unica (forma|maneira) de parar de pensar)",
    "fr": r"((pour )?sentir (enfin )?quelque chose|pour me punir|comme (une )?punition|ca me calme|m.?a calmee?|"
    r"jusqu.?au sang|personne ne (le )?(voit|verra)|seul moyen d.?arreter de (penser|ressentir))",
    "es": r"((para )?sentir algo|como castigo|para castigarme|me calma|hasta sangrar|hasta (hacerme|que me salgan?) "
    r"(heridas|sangre)|nadie (lo )?ve|unica (forma|manera) de dejar de pensar)",
}


def _near(act: str, purpose: str) -> list[str]:
    return [
        r"\b" + act + r"\b" + WINDOW + r"\b" + purpose + r"\b",
        r"\b" + purpose + r"\b" + WINDOW + r"\b" + act + r"\b",
    ]


PATTERNS: dict[str, dict[str, list[str]]] = {
    locale: {"self_harm": _near(ACT[locale], PURPOSE[locale])} for locale in ACT
}


def seed(apps, schema_editor):
    add_patterns(apps.get_model("agents", "CrisisPattern"), PATTERNS, SEEDED_NOTE)


class Migration(migrations.Migration):
    dependencies = [("agents", "0030_crisis_patterns_russian_quitting")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
