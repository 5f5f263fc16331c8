"""The crisis pre-gate: recognises crisis language in a coachee's message before any model runs.

No LLM is involved, so it works when every model endpoint is down, and it answers within
the request that stored the message. Every active pattern is checked whatever the session's
locale: people write in the language they are in, not the one they signed up with.
"""

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


def normalise(text: str) -> str:
    # NFKC folds look-alike characters (full-width letters, ligatures) people or keyboards produce.
    return unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")  # typographic apostrophe


def pregate(text: str) -> CrisisMatch | None:
    """The first active pattern the text matches, or None."""
    normalised = normalise(text)
    for locale, pattern in CrisisPattern.objects.filter(active=True).values_list("locale", "pattern"):
        try:
            if re.search(pattern, normalised, re.IGNORECASE):
                return CrisisMatch(locale, pattern)
        except re.error:
            continue  # an invalid pattern saved past validation must not block the others
    return None


def crisis_reply(locale: str) -> str:
    return CRISIS_REPLIES.get(locale.split("-")[0], CRISIS_REPLIES["en"])
