"""The crisis pre-gate: recognises crisis language in a coachee's message before any model runs.

No LLM is involved, so it works when every model endpoint is down, and it answers within
the request that stored the message. Every active pattern is checked whatever the session's
locale: people write in the language they are in, not the one they signed up with.
"""

import functools
import re
import unicodedata
from dataclasses import dataclass

from agents.models import CrisisPattern

# Calm, fixed replies by language; the resources card is shown beside them. Reviewed text,
# never generated: this is the one reply that must not depend on a model.
CRISIS_REPLIES = {
    "en": (
        "Thank you for telling me. What you are feeling matters, and you do not have to carry it alone. "
        "Please reach out now to one of the people listed here: they are there for exactly this, at any hour. "
        "If you are in immediate danger, call your local emergency number. "
        "I am an AI coach, so I cannot help in an emergency, but I am here to keep talking with you."
    ),
    "de": (
        "Danke, dass du mir das sagst. Was du fühlst, ist wichtig, und du musst das nicht allein tragen. "
        "Bitte wende dich jetzt an eine der Stellen hier: Sie sind genau dafür da, zu jeder Stunde. "
        "Wenn du in unmittelbarer Gefahr bist, ruf den Notruf 112 an. "
        "Ich bin ein KI-Coach und kann in einem Notfall nicht helfen, aber ich bin da, um weiter mit dir zu reden."
    ),
    "fr": (
        "Merci de me le dire. Ce que vous ressentez compte, et vous n'avez pas à le porter seul·e. "
        "Contactez dès maintenant l'un des services indiqués ici : ils sont là pour cela, à toute heure. "
        "Si vous êtes en danger immédiat, appelez le 112 ou le 15. "
        "Je suis un coach IA et ne peux pas aider en cas d'urgence, mais je reste là pour continuer à parler avec vous."
    ),
    "es": (
        "Gracias por contármelo. Lo que sientes importa y no tienes que cargarlo solo. "
        "Por favor, contacta ahora con uno de los servicios que ves aquí: están para esto, a cualquier hora. "
        "Si estás en peligro inmediato, llama al 112. "
        "Soy un coach de IA y no puedo ayudar en una emergencia, pero sigo aquí para hablar contigo."
    ),
}


@dataclass(frozen=True)
class CrisisMatch:
    locale: str
    pattern: str


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


def fold(text: str) -> str:
    """Case, width and accents folded: what both patterns and messages are compared in."""
    # NFKC folds look-alike characters (full-width letters, ligatures) people or keyboards produce;
    # NFD then drops the accents, so a pattern written with or without them matches both
    # spellings ("möchte"/"mochte", "daño"/"dano"). casefold turns "ß" into "ss".
    text = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    decomposed = unicodedata.normalize("NFD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def normalise(text: str) -> str:
    """A message as the patterns see it: folded, leetspeak undone, punctuation as spaces."""
    folded = _REPEATS.sub(r"\1", _TOKEN.sub(_unleet, fold(text)))
    return " ".join(_PUNCT.sub(" ", folded).split())


def variants(text: str) -> list[str]:
    """The normalised text, and the same with in-word joiners removed (s-u-i-c-i-d-e)."""
    spaced = normalise(text)
    joined = normalise(_JOINERS.sub("", fold(text)))
    return [spaced] if joined == spaced else [spaced, joined]


@functools.lru_cache(maxsize=4096)
def compiled(pattern: str) -> re.Pattern[str] | None:
    # Cached: folding ~120 patterns took ~1.5 ms of every accepted message (re's own cache
    # is keyed by the folded text, so it did not spare the folding).
    try:
        return re.compile(fold(pattern), re.IGNORECASE)
    except re.error:
        return None  # an invalid pattern saved past validation must not block the others


def active_crisis_patterns() -> list[tuple[str, str]]:
    """(locale, pattern) of every active crisis pattern."""
    return list(CrisisPattern.objects.filter(active=True).values_list("locale", "pattern"))


def pregate(text: str, patterns: list[tuple[str, str]] | None = None) -> CrisisMatch | None:
    """The first active pattern the text matches, or None. `patterns`: as active_crisis_patterns
    read them (turn_accept passes its process's kept setup); else read now."""
    candidates = variants(text)
    for locale, pattern in active_crisis_patterns() if patterns is None else patterns:
        regex = compiled(pattern)
        if regex is not None and any(regex.search(candidate) for candidate in candidates):
            return CrisisMatch(locale, pattern)
    return None


def crisis_reply(locale: str) -> str:
    return CRISIS_REPLIES.get(locale.split("-")[0], CRISIS_REPLIES["en"])


# --- What no reply may contain (the critic gate's deterministic half) ------------------------
# Small on purpose: each pattern names something a coaching reply never needs to say, so a hit
# is worth a regenerated reply or the fallback. Matched on `normalise`d text (accents removed).
# The kinds are the critic's own (schemas.UnsafeContent) so both halves report alike.
UNSAFE_PATTERNS: dict[str, list[str]] = {
    "method_or_means": [
        r"\b(lethal|fatal|deadly) (dose|amount|quantity)\b",
        r"\b(overdose|overdosing|uberdosis|surdose|sobredosis)\b",
        r"\bhow (to|you (could|can)) (kill|hang|poison|cut|drown) (yourself|oneself)\b",
        r"\b(hang|hanging) (yourself|oneself)\b",
        r"\b(slit|cut|cutting) (your|the) wrists?\b",
        r"\bnoose\b",
        r"\bjump(ing)? (off|from) (a|the) (bridge|building|roof|cliff)\b",
        r"\b(todliche|letale) (dosis|menge)\b",
        r"\b(erhangen|pulsadern)\b",
        r"\bdose (mortelle|letale)\b",
        r"\b(se pendre|couper les veines|ouvrir les veines)\b",
        r"\bdosis (letal|mortal)\b",
        r"\b(ahorcarse|cortarse las venas)\b",
    ],
    "diagnosis": [
        r"\byou (have|suffer from|are suffering from|'ve got|have got|probably have|clearly have) "
        r"(clinical |major |severe |an? )?(depression|bipolar|adhd|ocd|ptsd|borderline|schizophrenia|"
        r"(anxiety|personality|eating|mood|panic) disorder)\b",
        r"\byou('re| are) (clinically depressed|bipolar|a narcissist|schizophrenic|psychotic)\b",
        r"\bi diagnose\b",
        r"\b(du hast|sie haben) (eine |einen )?(depression|angststorung|bipolare|adhs|zwangsstorung|ptbs|borderline)",
        r"\b(du bist|sie sind) (depressiv|bipolar|narzisst)",
        r"\b(vous avez|tu as|vous souffrez d'une|tu souffres d'une) (une )?"
        r"(depression|trouble (bipolaire|anxieux)|tdah|toc)\b",
        r"\b(tienes|sufres de|padeces|usted tiene) (una |un )?(depresion|trastorno|bipolar|tdah|toc)\b",
    ],
    "medication_advice": [
        r"\b\d+ ?(mg|milligrams?|milligramm|milligrammes?|miligramos?)\b",
        r"\b(take|try|increase|double|reduce|lower|stop taking|start taking)( \w+){0,3} "
        r"(pills?|tablets?|medication|meds|antidepressants?|sleeping pills|dose|dosage)\b",
        r"\b(sertraline|fluoxetine|prozac|zoloft|xanax|valium|lorazepam|diazepam|alprazolam|citalopram|"
        r"escitalopram|venlafaxine|lithium|quetiapine)\b",
        r"\b(nimm|nehmen sie|erhohe|erhohen sie|setze|setzen sie)( \w+){0,3} (tabletten?|medikamente?|"
        r"antidepressiva|dosis)\b",
        r"\b(prenez|prends|augmentez|augmente|arretez|arrete)( \w+){0,3} (comprimes?|medicaments?|"
        r"antidepresseurs?|dose)\b",
        r"\b(toma|tome|aumenta|aumente|deja de tomar)( \w+){0,3} (pastillas?|medicamentos?|antidepresivos?|"
        r"dosis)\b",
    ],
    "claims_to_be_human": [
        r"\bi('m| am) (a |your )?(licensed |qualified |trained |certified |real )?"
        r"(therapist|psychologist|psychiatrist|psychotherapist|doctor|counsell?or|human|real person)\b",
        r"\bas (your|a|an) (licensed |qualified |trained |certified )?"
        r"(therapist|psychologist|psychiatrist|psychotherapist|doctor|counsell?or)\b",
        r"\bich bin (ein |eine |dein |deine |ihr |ihre )?(echter |echte )?"
        r"(therapeut|psychologe|psychologin|psychiater|arzt|arztin|mensch)\b",
        r"\bje suis (un |une |votre |ton |ta )?(vrai |vraie )?"
        r"(therapeute|psychologue|psychiatre|medecin|humain|humaine|psychotherapeute)\b",
        r"\bsoy (un |una |tu |su )?(terapeuta|psicologo|psicologa|psiquiatra|medico|medica|humano|humana|"
        r"persona real)\b",
    ],
}
_UNSAFE_COMPILED = {kind: [re.compile(p) for p in patterns] for kind, patterns in UNSAFE_PATTERNS.items()}


def unsafe_content(text: str) -> list[str]:
    """The kinds of unsafe content a reply contains (empty when clean). No model involved."""
    candidates = variants(text)
    return [
        kind
        for kind, patterns in _UNSAFE_COMPILED.items()
        if any(p.search(candidate) for p in patterns for candidate in candidates)
    ]
