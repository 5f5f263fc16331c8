"""Crisis lexicon, batch 6: a plan told as a place and an act, and a weapon one can get to.

A concrete plan is the weakest category of every blind set (about 70 % caught), and the classifier
reads it weakly, more so outside English: it is told in few words, with no word of death in them
("friday I go up to the roof and that's it"). Two concepts, in every language:

- **a place to die and the act or its finality, near each other**: a height, tracks or deep
  water (a roof, a bridge, a cliff, a viaduct, a balcony, the rails, the sea) within a few words
  of jumping or of a finality ("and that's it", "for good", "not coming back", "с концами",
  "dann ist Schluss", "e acabou", "pour de bon", "y se acabó"). Not where the message is about
  bungee jumping, diving, swimming, a party, a view, photographs or fireworks: those are how the
  same words are used every day;
- **a gun one can get to**: a firearm beside knowing its safe's code or where the ammunition is.

Written from the development set `plans` (tests/data/crisis_plans.tsv, never trained on) and
measured on a blind set written for the purpose before its first run (docs/crisis-safety.md).
Same seeding rules as every batch: added where (locale, pattern) is new, an operator's edit kept.
"""

from django.db import migrations

from agents.migrations._crisis_lexicon import add_patterns

SEEDED_NOTE = "default lexicon, batch 6: plans (migration 0031)"

WINDOW = r".{0,40}"

# A height or tracks: jumping there, or a finality.
HEIGHT = {
    "en": r"(roofs?|rooftop|bridge|cliffs?|ledge|overpass|viaduct|(train |railway |rail )?tracks|railway line|"
    r"balcony|tower block)",
    "ru": r"(крыш\w*|мост\w*|балкон\w*|обрыв\w*|рельс\w*|электричк\w*|высотк\w*)",
    "de": r"(dach|brucke|klippen?|gleisen?|schienen|bahngleis\w*|balkon|hochhaus)",
    "pt": r"(laje|telhado|ponte|viaduto|penhasco|falesia|precipicio|trilhos?|linha do (trem|comboio)|varanda|molhe)",
    "fr": r"(toit|pont|viaduc|falaise|voies?( ferree)?|rails|balcon)",
    "es": r"(azotea|tejado|(?<!de )puente|viaducto|acantilado|barranco|vias( del tren)?|balcon|mirador|andamio)",
}
# Deep water: only a finality (jumping into a lake is swimming).
WATER = {
    "en": r"(the (lake|river|sea|ocean))",
    "ru": r"(волг\w*|реку|речку|озеро|море)",
    "de": r"((zum|in den|an den) see|(zum|in den|an den) fluss|(ins|zum|ans) meer)",
    "pt": r"(represa|(o|no|pro|para o|ao) mar|(o|no|pro|para o|ao) rio)",
    "fr": r"(la mer|le lac|la riviere|la seine|le fleuve)",
    "es": r"(presa|el mar|el rio|el lago)",
}
JUMP = {
    "en": r"(jump|jumping|i jump|step off)",
    "ru": r"((с|вы)?прыгну(ть)?|шагну(ть)?|и вниз|брошусь|кинусь)",
    "de": r"((runter)?spring(e|en)|spring ich)",
    "pt": r"(pul(o|ar)|me jog(o|ar))",
    "fr": r"(je saute|sauter|me jeter|je me jette|et hop)",
    "es": r"(salt(o|ar|are)|me tiro|tirarme|me aviento|aventarme)",
}
FINALITY = {
    "en": r"(and (that's|thats|that is) it|for good|and (i'm|im|i am) done|then (i'm|im) doing it|"
    r"not coming back|won't come back|wont come back|never coming back|end it( all)?)",
    "ru": r"(с концами|не вернусь|вс[её] законч\w*|законч\w* вс[её]|и конец)",
    "de": r"(dann ist schluss|ist dann schluss|fur immer|komme? nicht (mehr )?zuruck|mach ichs|mach ich es)",
    "pt": r"(e acabou|(pra|para) sempre|de vez(?! em quando)|nao volto|nao vou voltar|e hoje|acabar com tudo)",
    "fr": r"(c'est fini|(?<!ai )(?<!a )fini|pour de bon|pour toujours|(ne )?reviendrai pas|c'est la fin|en finir)",
    "es": r"(y se acabo|para siempre|no vuelvo|no voy a volver|hoy es el dia|acabar con todo)",
}
# How the same places and acts are used every day, in any of the languages (people mix them):
# a message that names one of these anywhere is left to the classifier.
EVERYDAY_LATIN = (
    r"bungee|base jump|parkour|cliff ?(diving|jumping)|diving|swim|party|fireworks|photo|selfie|sunset|concert|"
    r"fallschirm|klippenspring|baden|schwimm|tauch|feuerwerk|aussicht|sonnenuntergang|konzert|"
    r"paraquedas|rapel|mergulh|nadar|festa|fogos|por do sol|"
    r"elastique|plonge|baign|nager|soiree|coucher de soleil|feu d'artifice|"
    r"puenting|paracaidas|clavad|banar|fiesta|atardecer|concierto|"
    r"novel|roman|in the (film|movie|game)|im (film|spiel)|no (filme|jogo)|dans (le film|le jeu)|"
    r"en (la pelicula|el juego)|in the news|nachrichten|noticia|aux infos|no jornal"
)
# A Cyrillic pattern is matched on the message's Latin skeleton (pregate.pattern_regex_source),
# so Russian's guard holds its own words and the others'.
EVERYDAY = {
    locale: EVERYDAY_LATIN
    + (
        r"|банджи|тарзанк|парашют|паркур|в воду|купа|нырн|плава|вечеринк|салют|фото|видос|закат|концерт|"
        r"в романе|в фильме|в игре|новост"
        if locale == "ru"
        else ""
    )
    for locale in ("en", "ru", "de", "pt", "fr", "es")
}


def _near(locale: str, place: str, act: str) -> list[str]:
    """The place and the act within a few words, either order, where no everyday use is named
    (anywhere, inside a word too: punctuation is gone from the skeleton, "l'elastique")."""
    guard = r"^(?!.*(" + EVERYDAY[locale] + r"))"
    return [
        guard + r".*\b" + place + r"\b" + WINDOW + r"\b" + act + r"\b",
        guard + r".*\b" + act + r"\b" + WINDOW + r"\b" + place + r"\b",
    ]


# A firearm, and knowing how to open its safe or where its ammunition is.
GUN_WITHIN_REACH = {
    "en": [
        r"\b(gun|rifle|shotgun|pistol|revolver|gun safe)s?\b.{0,60}\bi know (the (code|combination)|"
        r"where (the|he keeps the|she keeps the|they keep the) (key|ammo|bullets|shells))\b",
    ],
    "ru": [
        r"\b(ружь\w*|карабин\w*|пистолет\w*|оружи\w*|сейф\w*)\b.{0,60}\bкод\w*\b.{0,15}\b(знаю|подсмотрел\w*|узнал\w*)",
        r"\b(ружь\w*|карабин\w*|пистолет\w*)\b.{0,60}\bзнаю где (патроны|ключ)",
    ],
    "de": [
        r"\b(gewehr|pistole|waffe|revolver|waffenschrank)\w*\b.{0,60}\b(ich )?weiss (ich )?(den code|"
        r"die kombination|wo (die munition|die patronen|der schlussel))",
    ],
    "pt": [
        r"\b(arma|pistola|revolver|espingarda|cofre)\b.{0,60}\b(eu )?sei (a senha|o codigo|a combinacao|"
        r"onde (fica|esta|ficam|estao) (a chave|a municao|as balas))",
    ],
    "fr": [
        r"\b(arme|fusil|pistolet|revolver|carabine)\b.{0,60}\bje connais (le code|la combinaison)\b",
        r"\b(arme|fusil|pistolet|revolver|carabine)\b.{0,60}\bje sais ou (sont|il range|elle range) "
        r"(les (munitions|balles|cartouches)|la cle)",
    ],
    "es": [
        r"\b(pistola|arma|escopeta|rifle|revolver|caja fuerte)\b.{0,60}\b(me )?se (la combinacion|el codigo|"
        r"donde (esta|estan|guarda) (la llave|las balas|los cartuchos))",
        r"\b(pistola|arma|escopeta|rifle|revolver)\b.{0,60}\bhoy es el dia\b",
    ],
}

PATTERNS: dict[str, dict[str, list[str]]] = {
    locale: {
        "suicide": _near(locale, HEIGHT[locale], "(" + JUMP[locale] + "|" + FINALITY[locale] + ")")
        + _near(locale, WATER[locale], FINALITY[locale]),
        "means": GUN_WITHIN_REACH[locale],
    }
    for locale in HEIGHT
}


def seed(apps, schema_editor):
    add_patterns(apps.get_model("agents", "CrisisPattern"), PATTERNS, SEEDED_NOTE)


class Migration(migrations.Migration):
    dependencies = [("agents", "0030_crisis_patterns_russian_quitting")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
