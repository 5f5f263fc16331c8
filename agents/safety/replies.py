"""What the crisis answer says, in the coachee's language: the calm reply that takes Coach's
place and the resources card's title and footer. Reviewed text, never generated; the pre-gate
(pregate.py) decides when they are shown, turns.accept and turns.crisis show them."""

from agents.models import CrisisCategory, Escalation

# Calm, fixed replies by language; the resources card is shown beside them. This is the one
# reply that must not depend on a model.
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
