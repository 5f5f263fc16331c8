"""The crisis pre-gate: recognises crisis language in a coachee's message before any model runs.

No LLM is involved, so it works when every model endpoint is down, and it answers within
the request that stored the message. Every active pattern is checked whatever the session's
locale: people write in the language they are in, not the one they signed up with.
"""

import functools
import itertools
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

import re2

from agents.models import CrisisCategory, CrisisPattern, Escalation, Message, Role

# How the pre-gate reads text (the classifier reads it so too).
from agents.safety.reading import CYRILLIC_LETTER, fold, informational, readings, skeleton, variants

logger = logging.getLogger(__name__)

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
    "ru": (
        "Спасибо, что рассказали мне. То, что вы чувствуете, важно, и вам не нужно нести это в одиночку. "
        "Пожалуйста, обратитесь сейчас в одну из служб, указанных здесь: они работают именно для этого, в любое время. "
        "Если вам угрожает непосредственная опасность, звоните 112. "
        "Я ИИ-коуч и не могу помочь в экстренной ситуации, но я здесь и готов продолжать разговор."
    ),
    "pt": (
        "Obrigado por me contar. O que você sente importa, e você não precisa carregar isso sozinho. "
        "Por favor, procure agora um dos serviços indicados aqui: eles existem exatamente para isso, a qualquer hora. "
        "Se estiver em perigo imediato, ligue para o número de emergência local (112 em Portugal, 192 no Brasil). "
        "Sou um coach de IA e não posso ajudar numa emergência, mas continuo aqui para conversar com você."
    ),
}

# When the words are about being hurt by someone: safety first, the abuse lines on the card.
ABUSE_REPLIES = {
    "en": (
        "Thank you for telling me. No one has the right to hurt you, and this is not your fault. "
        "If you are in danger right now, call your local emergency number. "
        "The people listed here help with exactly this, confidentially: they can help you plan how to stay safe. "
        "I am an AI coach and cannot help in an emergency, but I am here to keep talking with you."
    ),
    "de": (
        "Danke, dass du mir das sagst. Niemand hat das Recht, dir wehzutun, und es ist nicht deine Schuld. "
        "Wenn du jetzt in Gefahr bist, ruf den Notruf 110 oder 112 an. "
        "Die Stellen hier helfen genau dabei, vertraulich: auch dabei, wie du dich schützen kannst. "
        "Ich bin ein KI-Coach und kann in einem Notfall nicht helfen, aber ich bin da, um weiter mit dir zu reden."
    ),
    "fr": (
        "Merci de me le dire. Personne n'a le droit de vous faire du mal, et ce n'est pas votre faute. "
        "Si vous êtes en danger maintenant, appelez le 17 ou le 112 (ou envoyez un SMS au 114). "
        "Les services indiqués ici aident exactement pour cela, en toute confidentialité. "
        "Je suis un coach IA et ne peux pas aider en cas d'urgence, mais je reste là pour continuer à parler avec vous."
    ),
    "es": (
        "Gracias por contármelo. Nadie tiene derecho a hacerte daño, y no es culpa tuya. "
        "Si estás en peligro ahora, llama al 112. "
        "Los servicios que ves aquí ayudan exactamente con esto, de forma confidencial. "
        "Soy un coach de IA y no puedo ayudar en una emergencia, pero sigo aquí para hablar contigo."
    ),
    "ru": (
        "Спасибо, что рассказали. Никто не имеет права причинять вам боль, и вы в этом не виноваты. "
        "Если вам угрожает опасность прямо сейчас, звоните 112. "
        "Службы, указанные здесь, помогают именно в таких ситуациях, конфиденциально. "
        "Я ИИ-коуч и не могу помочь в экстренной ситуации, но я здесь и готов продолжать разговор."
    ),
    "pt": (
        "Obrigado por me contar. Ninguém tem o direito de machucar você, e a culpa não é sua. "
        "Se estiver em perigo agora, ligue para o número de emergência (112 em Portugal, 190 no Brasil). "
        "Os serviços indicados aqui ajudam exatamente nisso, com confidencialidade. "
        "Sou um coach de IA e não posso ajudar numa emergência, mas continuo aqui para conversar com você."
    ),
}

# When the words tell someone else's crisis (whose.py): to the person who is worried, and still
# to the writer, should the reading be wrong. The card beside it is the same.
SOMEONE_ELSE_REPLIES = {
    "en": (
        "Thank you for telling me; it matters that you are looking out for them. "
        "If anyone is in immediate danger, call your local emergency number now. "
        "The people listed here also help those who are worried about someone, and they are there for you too "
        "if this is about you. "
        "I am an AI coach and cannot help in an emergency, but I am here to keep talking with you."
    ),
    "de": (
        "Danke, dass du mir das sagst; es ist wichtig, dass du auf diesen Menschen achtest. "
        "Wenn jemand in unmittelbarer Gefahr ist, ruf jetzt den Notruf 112 an. "
        "Die Stellen hier beraten auch Menschen, die sich um jemanden sorgen, und sie sind auch für dich da, "
        "wenn es um dich selbst geht. "
        "Ich bin ein KI-Coach und kann in einem Notfall nicht helfen, aber ich bin da, um weiter mit dir zu reden."
    ),
    "fr": (
        "Merci de me le dire : c'est important que vous veilliez sur cette personne. "
        "Si quelqu'un est en danger immédiat, appelez maintenant le 112 ou le 15. "
        "Les services indiqués ici aident aussi les proches inquiets pour quelqu'un, et ils sont là pour vous "
        "aussi si c'est de vous qu'il s'agit. "
        "Je suis un coach IA et ne peux pas aider en cas d'urgence, mais je reste là pour continuer à parler avec vous."
    ),
    "es": (
        "Gracias por contármelo: es importante que estés pendiente de esa persona. "
        "Si alguien está en peligro inmediato, llama ahora al 112. "
        "Los servicios que ves aquí también ayudan a quienes se preocupan por alguien, y también están para ti "
        "si se trata de ti. "
        "Soy un coach de IA y no puedo ayudar en una emergencia, pero sigo aquí para hablar contigo."
    ),
    "ru": (
        "Спасибо, что рассказали: важно, что вы не оставляете этого человека без внимания. "
        "Если кому-то угрожает непосредственная опасность, звоните 112 прямо сейчас. "
        "Службы, указанные здесь, помогают и тем, кто беспокоится о близком человеке, и они готовы помочь вам, "
        "если речь о вас самих. "
        "Я ИИ-коуч и не могу помочь в экстренной ситуации, но я здесь и готов продолжать разговор."
    ),
    "pt": (
        "Obrigado por me contar: é importante que você esteja atento a essa pessoa. "
        "Se alguém estiver em perigo imediato, ligue agora para o número de emergência local "
        "(112 em Portugal, 192 no Brasil). "
        "Os serviços indicados aqui também ajudam quem está preocupado com alguém, e estão aqui para você também, "
        "se for sobre você. "
        "Sou um coach de IA e não posso ajudar numa emergência, mas continuo aqui para conversar com você."
    ),
}

CARD_TEXTS = {
    "en": {
        "someone_else": "Worried about someone, or about yourself? These people can help now.",
        "crisis": "If you are in danger or thinking about harming yourself, please reach out now.",
        "refer": "You do not have to carry this alone. People are ready to help.",
        "footer": "In immediate danger, call your local emergency number.",
    },
    "de": {
        "someone_else": "Sorgst du dich um jemanden oder um dich selbst? Hier bekommst du jetzt Hilfe.",
        "crisis": "Wenn du in Gefahr bist oder daran denkst, dir etwas anzutun, melde dich bitte jetzt.",
        "refer": "Du musst das nicht allein tragen. Hier sind Menschen, die helfen.",
        "footer": "In akuter Gefahr: Notruf 112.",
    },
    "fr": {
        "someone_else": "Inquiet·e pour quelqu'un, ou pour vous-même ? Ces services peuvent aider maintenant.",
        "crisis": "Si vous êtes en danger ou pensez à vous faire du mal, contactez quelqu'un maintenant.",
        "refer": "Vous n'avez pas à porter cela seul·e. Des personnes sont prêtes à vous aider.",
        "footer": "En danger immédiat, appelez le 112.",
    },
    "es": {
        "someone_else": "¿Te preocupa alguien, o te preocupas por ti? Aquí pueden ayudarte ahora.",
        "crisis": "Si estás en peligro o piensas en hacerte daño, por favor busca ayuda ahora.",
        "refer": "No tienes que cargar con esto solo. Hay personas listas para ayudarte.",
        "footer": "En peligro inmediato, llama al 112.",
    },
    "ru": {
        "someone_else": "Беспокоитесь о ком-то или о себе? Здесь помогут прямо сейчас.",
        "crisis": (
            "Если вам угрожает опасность или вы думаете о том, чтобы причинить себе вред, обратитесь за помощью сейчас."
        ),
        "refer": "Вам не нужно справляться с этим в одиночку. Здесь есть люди, готовые помочь.",
        "footer": "При непосредственной опасности звоните 112.",
    },
    "pt": {
        "someone_else": "Preocupado com alguém, ou com você? Estas pessoas podem ajudar agora.",
        "crisis": "Se você está em perigo ou pensando em se machucar, procure ajuda agora.",
        "refer": "Você não precisa carregar isso sozinho. Há pessoas prontas para ajudar.",
        "footer": "Em perigo imediato, ligue para o número de emergência local.",
    },
}


@dataclass(frozen=True)
class CrisisMatch:
    locale: str
    pattern: str
    pattern_id: int | None = None
    category: str = CrisisCategory.SUICIDE


# (id, locale, pattern, category) of an active crisis pattern, as the turn setup keeps them.
PatternRow = tuple[int, str, str, str]


@functools.lru_cache(maxsize=4096)
def pattern_regex_source(pattern: str) -> str:
    """A pattern as compiled: folded; one written in Cyrillic becomes its Latin skeleton (it is
    then matched against the skeleton variant of a message, whichever script that used)."""
    folded = fold(pattern)
    return skeleton(folded) if CYRILLIC_LETTER.search(folded) else folded


@functools.lru_cache(maxsize=4096)
def compiled(pattern: str) -> re.Pattern[str] | None:
    # Cached: folding ~120 patterns took ~1.5 ms of every accepted message (re's own cache
    # is keyed by the folded text, so it did not spare the folding).
    try:
        return re.compile(pattern_regex_source(pattern), re.IGNORECASE)
    except re.error:
        return None  # an invalid pattern saved past validation must not block the others


def active_crisis_patterns() -> list[PatternRow]:
    """(id, locale, pattern, category) of every active crisis pattern."""
    return list(CrisisPattern.objects.filter(active=True).values_list("id", "locale", "pattern", "category"))


_CHAR_CLASS = re.compile(r"\[[^\]]*\]|\(\?<?[!=][^)]*\)")  # character classes and lookarounds


@functools.lru_cache(maxsize=4096)
def is_keyword(pattern: str) -> bool:
    """A pattern for one word (no space outside character classes and lookarounds): "suicid"."""
    return " " not in _CHAR_CLASS.sub("", pattern).replace(" ?", "")  # "селф ?харм" is one word too


# RE2 runs every pattern over the text in one linear pass (a set), where Python's re would run
# ~500 backtracking searches: ~170 ms for a 4,000-character message against well under 1 ms.
# RE2 lacks lookarounds and Unicode \b, so it only preselects: each pattern is loosened for it
# (lookarounds and \b dropped, \w made Unicode), which can only match more, and a preselected
# pattern is then confirmed with Python's re. A pattern RE2 cannot read is always checked.
def _without_lookarounds(source: str) -> str:
    """The pattern with every lookahead and lookbehind group removed, however deeply nested."""
    out: list[str] = []
    depth = 0  # > 0 while inside a lookaround group being dropped
    index = 0
    in_class = False
    while index < len(source):
        char = source[index]
        if char == "\\":
            if not depth:
                out.append(source[index : index + 2])
            index += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "(" and (depth or source.startswith(("(?=", "(?!", "(?<=", "(?<!"), index)):
            depth += 1
            index += 1
            continue
        elif char == ")" and depth:
            depth -= 1
            index += 1
            continue
        if not depth:
            out.append(char)
        index += 1
    return "".join(out)


# A counted repeat ("x{0,40}") becomes "x*": it can only match more, and RE2's automaton for ~750
# patterns with counted gaps was 3-4 times slower on a 4,000-character message than with open ones.
_COUNTED = re.compile(r"(?<!\\)\{\d+(,\d*)?\}")


def _loosened(source: str) -> str:
    source = _COUNTED.sub("*", _without_lookarounds(source)).replace("\\b", "")
    return source.replace("\\w", "[\\pL\\pN_]").replace("\\W", "[^\\pL\\pN_]")


class _Prefilter:
    def __init__(self, sources: tuple[str, ...]) -> None:
        options = re2.Options()
        options.case_sensitive = False
        # ~750 patterns with bounded gaps (".{0,40}") outgrow RE2's default 8 MB program budget.
        options.max_mem = 256 << 20
        self.set = re2.Set.SearchSet(options)
        self.index: list[int] = []  # RE2's pattern number → position in `sources`
        self.always: list[int] = []
        for position, source in enumerate(sources):
            try:
                self.set.Add(_loosened(source))
            except Exception:
                self.always.append(position)
            else:
                self.index.append(position)
        self.set.Compile()

    def candidates(self, texts: list[str]) -> list[int]:
        hits = set(self.always)
        for text in texts:
            hits.update(self.index[number] for number in self.set.Match(text) or ())
        return sorted(hits)


@functools.lru_cache(maxsize=8)
def _prefilter(sources: tuple[str, ...]) -> _Prefilter:
    return _Prefilter(sources)


def warm_patterns(patterns: list[PatternRow]) -> None:
    """Build the RE2 set for these patterns now (an operator's edit makes a new set)."""
    _prefilter(tuple(pattern_regex_source(row[2]) for row in patterns))


def warm(patterns: list[PatternRow]) -> None:
    """Build the RE2 set and load the classifier (and fit whose.py's reading, ~1 s) now, not on
    the first accepted message. For the process that accepts messages: a Celery worker never
    runs the pre-gate, and must not hold the classifier and its encoder (~1.5 s and ~100 MB a
    process) for nothing."""
    from agents.safety import classifier, whose

    warm_patterns(patterns)
    classifier.warm()
    whose.warm()


def warm_at_startup() -> None:
    """For the ASGI process: the pre-gate ready before the first message (a cold classifier
    fit or RE2 set build inside that message's request would cost it the one-second card)."""
    try:
        warm(active_crisis_patterns())
    except Exception:
        logger.exception("could not warm the crisis pre-gate at startup; the first message will")


def pregate(text: str, patterns: list[PatternRow] | None = None) -> CrisisMatch | None:
    """The first active pattern the text matches, or None. `patterns`: as active_crisis_patterns
    read them (turn_accept passes its process's kept setup); else read now. A one-word pattern
    does not count in a message that talks about the subject (INFORMATIONAL)."""
    rows = active_crisis_patterns() if patterns is None else patterns
    reading = readings(text)
    candidates = reading.all()
    prefilter = _prefilter(tuple(pattern_regex_source(row[2]) for row in rows))
    about: bool | None = None  # computed only when a keyword pattern matches
    for position in prefilter.candidates(candidates):
        pattern_id, locale, pattern, category = rows[position]
        regex = compiled(pattern)
        if regex is not None and any(regex.search(candidate) for candidate in reading.for_pattern(pattern)):
            if is_keyword(pattern):
                about = informational(candidates) if about is None else about
                if about:
                    continue
            return CrisisMatch(locale, pattern, pattern_id, category)
    return None


# How many earlier coachee messages of the session the detector reads with the current one.
HISTORY_MESSAGES = 3
HISTORY_CHARS = 1000  # of each, the end: what was said last before this message


def recent_coachee_texts(session_id: int, *, before_seq: int | None = None) -> list[str]:
    """The session's last few coachee messages (newest first), before `before_seq` if given."""
    messages = Message.objects.filter(session_id=session_id, role=Role.USER)
    if before_seq is not None:
        messages = messages.filter(seq__lt=before_seq)
    return history_from(messages.order_by("-seq").values_list("text", flat=True)[:HISTORY_MESSAGES])


def history_from(earlier: Iterable[str]) -> list[str]:
    """What `assess` reads of a session's earlier coachee messages, given newest first."""
    return [text[-HISTORY_CHARS:] for text in itertools.islice(earlier, HISTORY_MESSAGES)]


@dataclass(frozen=True)
class CrisisSignal:
    """Why the pre-gate answered with the card: which layer fired, on what, at which level."""

    layer: str  # "pattern" or "classifier"
    category: str
    detail: dict[str, object]
    someone_else: bool = False  # the words tell someone else's crisis (whose.py): the reply speaks to a helper

    @property
    def level(self) -> str:
        # Abuse gets its own resources at "refer" unless the words say danger is immediate;
        # every other category is a crisis.
        if self.category != CrisisCategory.ABUSE:
            return Escalation.CRISIS
        return Escalation.CRISIS if self.detail.get("immediate") else Escalation.REFER

    def record(self) -> dict[str, object]:
        return {
            "layer": self.layer,
            "category": self.category,
            "level": self.level,
            "someone_else": self.someone_else,
            **self.detail,
        }

    def reason(self) -> str:
        if self.layer == "pattern":
            return f"crisis language ({self.detail.get('locale')} pre-gate, pattern {self.detail.get('pattern_id')})"
        features = self.detail.get("features")
        named = ", ".join(map(repr, features)) if isinstance(features, list) else ""
        return f"crisis language (classifier {self.detail.get('score')}: {named})"[:200]


# Danger now, in any language: a weapon, a threat to kill, being locked in or hiding.
_IMMEDIATE = re.compile(
    r"\b(knife|gun|weapon|kill me|right now|hiding|locked|messer|umbringen|bringt mich um|couteau|me tuer|"
    r"cuchillo|matarme|me matar|faca|nozh|ubiet|ubit|zaperla|zaper|ostanovitsia|strangl|chok|wurg|etrangl|"
    r"estrangul|dushil)"
)


def _immediate(text: str) -> bool:
    return any(_IMMEDIATE.search(variant) for variant in variants(text))


def assess(
    text: str, patterns: list[PatternRow] | None = None, history: list[str] | None = None
) -> CrisisSignal | None:
    """Both layers of the pre-gate: the patterns, then the classifier (which also reads the
    session's last few coachee messages, `history`, newest first). None: no crisis signal.
    A signal also says how likely the words tell someone else's crisis (whose.py)."""
    from agents.safety import classifier, whose

    match = pregate(text, patterns)
    if match is not None:
        detail: dict[str, object] = {"pattern_id": match.pattern_id, "pattern": match.pattern, "locale": match.locale}
        layer, category = "pattern", match.category
    else:
        hit = classifier.classify(text, history)
        if hit is None:
            return None
        detail, layer, category = hit.detail(), "classifier", hit.category
    if category == CrisisCategory.ABUSE:
        detail["immediate"] = _immediate(text)
    probability = whose.someone_else(text)
    detail["someone_else_probability"] = round(probability, 3)
    return CrisisSignal(layer, category, detail, someone_else=probability >= whose.THRESHOLD)


def crisis_reply(locale: str, category: str = CrisisCategory.SUICIDE, *, someone_else: bool = False) -> str:
    """The calm reply in the coachee's language: to a helper where the words tell someone
    else's crisis, else to the person at risk (abuse: safety first)."""
    language = locale.split("-")[0]
    if someone_else:
        return SOMEONE_ELSE_REPLIES.get(language, SOMEONE_ELSE_REPLIES["en"])
    if category == CrisisCategory.ABUSE:
        return ABUSE_REPLIES.get(language, ABUSE_REPLIES["en"])
    return CRISIS_REPLIES.get(language, CRISIS_REPLIES["en"])


def card_text(locale: str, level: str, *, someone_else: bool = False) -> dict[str, str]:
    """The card's title and footer in the coachee's language (English for an unknown one)."""
    texts = CARD_TEXTS.get(locale.split("-")[0], CARD_TEXTS["en"])
    title = "someone_else" if someone_else else "crisis" if level == Escalation.CRISIS else "refer"
    return {"title": texts[title], "footer": texts["footer"]}


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
        r"\bdose (letal|fatal)\b",
        r"\b(enforcar-se|cortar os pulsos)\b",
        r"(смертельн\w* доз|летальн\w* доз|передозировк)",
        r"(повеситься|перерезать вены|вскрыть вены)",
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
        r"\b(voce tem|voce sofre de|tu tens|tens) (uma |um )?(depressao|transtorno|bipolar|tdah|toc)\b",
        r"(у (вас|тебя) (клиническая |тяжелая )?(депрессия|биполярн|расстройство|сдвг|окр|птср))",
        r"((вы|ты) (страдаете|страдаешь) (от )?(депресси|расстройств))",
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
        r"\b(tome|toma|aumente|pare de tomar|deixe de tomar)( \w+){0,3} (comprimidos?|remedios?|medicamentos?|"
        r"antidepressivos?|dose)\b",
        r"\d+ ?(мг|миллиграмм)",
        r"((примите|принимаи|выпеите|выпеи|увеличьте|увеличь|прекратите принимать|брось принимать)( \w+){0,3} "
        r"(таблет|лекарств|антидепрессант|дозу))",
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
        r"\bsou (um |uma |o seu |a sua |seu |sua )?(terapeuta|psicologo|psicologa|psiquiatra|medico|medica|humano|"
        r"humana|pessoa real)\b",
        r"(я (ваш |твои |настоящии )?(психотерапевт|психолог|психиатр|врач)\b|я (живои|настоящии) человек)",
    ],
}
# One compiled alternation per kind, so a finding names its kind.
_UNSAFE_COMPILED = {
    kind: re.compile("|".join(f"(?:{p})" for p in patterns)) for kind, patterns in UNSAFE_PATTERNS.items()
}


def unsafe_content(text: str) -> list[str]:
    """The kinds of unsafe content a reply contains (empty when clean). No model involved."""
    candidates = variants(text)
    return [kind for kind, pattern in _UNSAFE_COMPILED.items() if any(pattern.search(c) for c in candidates)]
