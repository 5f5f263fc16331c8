"""How the crisis pre-gate reads a message: folded (case, accents, invisible characters),
normalised (leetspeak, repeated letters, punctuation inside words), Cyrillic on a Latin
skeleton, and whether it talks *about* the subject rather than from inside it.

Shared by the patterns (pregate.py) and the classifier (classifier.py), which
must read text the same way; it imports neither.
"""

import re
import unicodedata
from dataclasses import dataclass

# Digits and symbols people type for letters ("su1c1de", "k1ll"); only swapped inside words
# that also have letters, so "112" or "3 times a week" are left alone.
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"})
_TOKEN = re.compile(r"[\w@$]+")
_HAS_LETTER = re.compile(r"[^\W\d_]")
_REPEATS = re.compile(r"(\w)\1{2,}")  # "diiiie" -> "die"; a doubled letter ("kill") stays
_PUNCT = re.compile(r"[^\w\s']+")
_JOINERS = re.compile(r"(?<=\w)[-._*](?=\w)")  # "s.u.i.c.i.d.e", "selbst-verletzung"


def _unleet(match: re.Match[str]) -> str:
    token = match.group(0)
    return token.translate(_LEET) if _HAS_LETTER.search(token) else token


# Invisible characters that split a word for the eye of a regex but not of a reader.
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\ufeff"))


def fold(text: str) -> str:
    """Case, width and accents folded: what both patterns and messages are compared in."""
    # NFKC folds look-alike characters (full-width letters, ligatures) people or keyboards produce;
    # NFD then drops the accents, so a pattern written with or without them matches both
    # spellings ("möchte"/"mochte", "daño"/"dano"). casefold turns "ß" into "ss".
    if text.isascii():  # most replies and messages: no width, accents or invisible characters
        return text.lower()
    text = unicodedata.normalize("NFKC", text).translate(_INVISIBLE).casefold().replace("\u2019", "'")
    decomposed = unicodedata.normalize("NFD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def normalise(text: str) -> str:
    """A message as the patterns see it: folded, leetspeak undone, punctuation as spaces."""
    return _normalise_folded(fold(text))


_LEET_CHARACTER = re.compile(r"[013457@$]")


def _normalise_folded(folded: str) -> str:
    # The leetspeak pass calls back into Python per word: skipped when there is nothing to undo.
    if _LEET_CHARACTER.search(folded):
        folded = _TOKEN.sub(_unleet, folded)
    return " ".join(_PUNCT.sub(" ", _REPEATS.sub(r"\1", folded)).split())


# Russian is often typed in Latin letters ("ne hochu zhit"). Cyrillic (already folded: й→и,
# ё→е) and the usual Latin spellings of the same sounds are reduced to one Latin skeleton, so a
# pattern written in Cyrillic matches both scripts. Lossy on purpose: щ/ш both "sh", ы/и/й "i".
_CYRILLIC = str.maketrans(
    {
        "а": "a", "б": "b", "в": "v", "г": "g", "д": "d", "е": "e", "ж": "zh", "з": "z", "и": "i",
        "к": "k", "л": "l", "м": "m", "н": "n", "о": "o", "п": "p", "р": "r", "с": "s", "т": "t",
        "у": "u", "ф": "f", "х": "h", "ц": "c", "ч": "ch", "ш": "sh", "щ": "sh", "ъ": "", "ы": "i",
        "ь": "", "э": "e", "ю": "iu", "я": "ia", "і": "i", "ї": "i", "є": "e",
    }
)  # fmt: skip
_LATIN_SOUNDS = [
    (re.compile(pattern), replacement)
    for pattern, replacement in [
        (r"shch|sch", "sh"), (r"kh|x", "h"), (r"ts", "c"), (r"[yj]", "i"), (r"'", ""),
    ]
]  # fmt: skip


def skeleton(normalised: str) -> str:
    """Normalised text with Cyrillic and transliterated Russian reduced to one Latin spelling."""
    out = normalised.translate(_CYRILLIC)
    for pattern, replacement in _LATIN_SOUNDS:
        out = pattern.sub(replacement, out)
    return out


CYRILLIC_LETTER = re.compile(r"[\u0400-\u04ff]")


@dataclass(frozen=True)
class Readings:
    """A message as patterns read it: `plain` (normalised, and again with in-word joiners removed:
    s-u-i-c-i-d-e) for patterns in Latin letters, `skeleton` for patterns written in Cyrillic
    (Russian in either script). A Latin pattern never sees the skeleton, whose j->i would defeat
    a guard such as "(?! hoje)"."""

    plain: tuple[str, ...]
    skeleton: str

    def all(self) -> list[str]:
        return list(dict.fromkeys([*self.plain, self.skeleton]))

    def for_pattern(self, pattern: str) -> tuple[str, ...]:
        return (self.skeleton,) if CYRILLIC_LETTER.search(pattern) else self.plain


def readings(text: str) -> Readings:
    folded = fold(text)
    spaced = _normalise_folded(folded)
    joined = _normalise_folded(_JOINERS.sub("", folded)) if _JOINERS.search(folded) else spaced
    return Readings(tuple(dict.fromkeys([spaced, joined])), skeleton(joined))


def variants(text: str) -> list[str]:
    """Every reading of the text (plain ones and the Latin skeleton), for checks that are not
    operators' patterns (INFORMATIONAL, unsafe content, immediate danger)."""
    return readings(text).all()


# Talk *about* the subject rather than from inside it: news, research, teaching, fiction,
# someone else's situation, a professional's question. There a lone keyword ("suicide",
# "overdose", "self-harm") is not a crisis signal by itself; a first-person phrase still is.
# Matched on `variants` (folded, accents removed; Russian on its Latin skeleton).
INFORMATIONAL = [
    r"\b(news|article|podcast|documentar\w*|episode|statistics|rates?|prevention|awareness|research|study|essay|"
    r"thesis|lecture|conference|volunteers?|hotline|warning signs|signs of|celebrity|singer|actor|famous|novel|"
    r"film|movie|series|character|as a (coach|teacher|manager|nurse|counsell?or|parent)|"
    r"(my|a) (client|student|pupil|friend|team|colleague)s?|how (do|can|should) i (help|support|ask|talk)|"
    r"how to (help|support|ask|talk)|talk (on|about)|teens|training)\b",
    r"\b(novost|stat\w+|podkast|dokumental|statistik|profilaktik|lekci|kursov|issledovan|volonter|telefon doverii|"
    r"priznak|kak kouch|uchitel|uchenic|uchenik|klient|podruga|kolleg|kak pomoch|kak podderzhat|kak (priamo )?sprosit|"
    r"akter|pevec|izvestn|knig|roman|film|serial|personazh|podrostk)\w*",
    r"\b(nachricht|artikel|podcast|doku|statistik|suizidrate|suizidpravention|pravention|vortrag|hausarbeit|studie|ehrenamt\w*|"
    r"telefonseelsorge|warnzeichen|als coach|als fuhrungskraft|lehrer|lehrerin|schuler|schulerin|klient|"
    r"meine freundin|wie unterstutze|wie frage ich|sanger|schauspieler|bekannt|buch|roman|film|serie|figur|"
    r"jugendlichen|landwirten)\w*",
    r"\b(article|infos|actualite|podcast|documentaire|statistiques|hausse|prevention|conference|memoire|etude|"
    r"benevole|sos amitie|signes|en tant que|prof|eleve|client|mon amie|comment (l'aider|la soutenir|aider|"
    r"demander)|chanteur|acteur|connu|livre|roman|film|serie|personnage|ados|agriculteurs)\b",
    r"\b(noticia|articulo|podcast|documental|estadistic\w*|aumento|prevencion|charla|trabajo sobre|estudio|"
    r"voluntari\w*|senales|como coach|como jefe|profesora|profesor|alumn\w*|cliente|mi amiga|como (la )?ayudo|"
    r"como (la )?apoyo|como preguntar|cantante|actor|famoso|libro|novela|pelicula|serie|personaje|adolescentes|"
    r"agricultores)\b",
    r"\b(noticia|artigo|podcast|documentario|estatistic\w*|aumento|prevencao|palestra|trabalho sobre|estudo|"
    r"voluntari\w*|sinais|como coach|como gestor|professora|professor|alun\w*|cliente|minha amiga|"
    r"como (apoia\w*|ajudo|perguntar)|cantor|ator|famoso|livro|romance|filme|serie|personagem|"
    r"setembro amarelo|adolescentes|agricultores)\b",
    # News read and words reported: "I read that the rate...", "my friend told me he...", "what
    # do I answer him?" (2026-12-05: the first blind set's false alarms were mostly these).
    r"\b(i read (that|about|an?)|newspaper|headlines?|trends?|tiktok|(suicide|safety) (nets|barriers|fences)|"
    r"one of my (reports|students|employees|staff)|"
    r"(friend|mate|buddy|colleague|brother|sister|son|daughter|cousin) (said|told me|says|texted|wrote)|"
    r"what (should|do|can) i (say|answer|reply|text|tell) (to )?(him|her|them))\b",
    r"\b(chital\w* (chto|o|pro|stat)|gazet\w*|uroven\w*|trend\w*|tiktok|"
    r"(drug|podrug\w*|brat|sestr\w*|syn|doch\w*|kolleg\w*) (skazal\w*|napisal\w*|govorit|priznal\w*)|"
    r"chto (mne )?(emu|ei|im) (otvetit|skazat|napisat))\b",
    r"\b(zeitung|gelesen|quote|trend\w*|tiktok|\w*schutznetz\w*|"
    r"(kumpel|freund|freundin|kollege|kollegin|bruder|schwester|sohn|tochter) (hat (mir )?(gesagt|geschrieben|erzahlt)|"
    r"sagt|meinte|schreibt)|was soll ich (ihm|ihr|ihnen) (sagen|antworten|schreiben))\b",
    r"\b(j'?ai lu|journal|taux|tendance|tiktok|filets?|"
    r"(mon pote|mon ami|ma pote|ma soeur|mon frere|mon fils|ma fille|mon collegue|ma collegue) "
    r"(m'?a dit|dit|a dit|m'?a ecrit)|"
    r"je (lui|leur) (reponds|dis) quoi|que (lui|leur) (dire|repondre))\b",
    r"\b(lei (que|un|sobre)|he leido|periodico|diario|tasa|tendencia|tiktok|mamparas|redes (anti|contra)|"
    r"(mi amigo|mi amiga|mi hermano|mi hermana|mi hijo|mi hija|mi companero|mi companera) "
    r"(me dijo|dice|me conto|me escribio)|"
    r"que le (digo|respondo|contesto))\b",
    r"\b(li (que|um|uma|sobre)|materia|reportagem|jornal|taxa|tendencia|tiktok|redes (anti|contra)|"
    r"(meu amigo|minha amiga|meu irmao|minha irma|meu filho|minha filha|meu colega|minha colega) "
    r"(disse|falou|me contou|me escreveu)|"
    r"o que (eu )?(respondo|digo|falo) (pra|para|a) (ele|ela))\b",
]
_INFORMATIONAL = [re.compile(pattern) for pattern in INFORMATIONAL]


def informational(candidates: list[str]) -> bool:
    return any(regex.search(candidate) for regex in _INFORMATIONAL for candidate in candidates)
