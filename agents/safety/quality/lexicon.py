"""Wording the quality gate looks for, in each language the product speaks (en, ru, de, pt, fr, es).

Every pattern is matched on text folded by `agents.safety.reading.fold` (lower case, accents removed),
so it is written without accents. Each one names something a reply *to a coachee* never needs:
a hit costs one regenerated reply (or, for Coach, the reply being withheld), which is cheap next
to a coachee reading junk. Kept apart from the checks so that reviewers can read the wording
without the code, and so adding a language touches this file only.
"""

# Talk about the machinery instead of to the person: the prompt, the JSON, "the user", the agents.
META_TALK: dict[str, list[str]] = {
    "en": [
        r"\bthe (json|schema|brief|briefing|prompt|system prompt|instructions?|output|input|user|users|assistant)\b",
        r"\b(json|schema|placeholder|system prompt|language model|llm)\b",
        r"\bcoachees?\b",
        r"\bthe (response|reply|answer|message) (is|was|should|must|will be|contains|above|below)\b",
        r"\b(here is|here's|below is|this is) (the|my|a|your) (revised |new |final |full |improved |corrected )?"
        r"(reply|response|answer|output)\b",
        r"\b(revised|corrected|improved) (reply|response|answer|version)\b",
        r"\b(allowed|blocked|suggested) moves?\b",
        r"\bmove (keys?|ids?|catalog)\b",
        r"\bthe (shadow|persona|plasticity|stability|synth|critic|coach) agent\b",
        r"\b(synth|plasticity agent|persona agent|stability agent|shadow agent)\b",
        r"\b(agents?|specialists?) (found|report|reported|say|said|suggest|suggested|think)\b",
        r"\b(arbitration|arbitrated|blackboard|escalation level)\b",
        r"\bas an ai( language)? model\b",
        r"\bi (cannot|can't|won't) (comply|follow (these|those|the) instructions)\b",
    ],
    "de": [
        r"\b(der|die|das|den|dem) (json|schema|prompt|brief|nutzer|nutzerin|benutzer|benutzerin|anweisung|"
        r"anweisungen|ausgabe|eingabe)\b",
        r"\bdie antwort (ist|lautet|war|sollte|enthalt)\b",
        r"\b(hier ist|das ist) (die|meine|eine) (uberarbeitete |neue |finale )?antwort\b",
        r"\b(erlaubte|blockierte|gesperrte) (moves?|zuge|schritte)\b",
        r"\bals (ki-?)?sprachmodell\b",
    ],
    "fr": [
        r"\b(le|la|les|l') ?(json|schema|prompt|brief|utilisateur|utilisatrice|consignes?|sortie)\b",
        r"\bla reponse (est|etait|doit|contient)\b",
        r"\b(voici|ceci est) (la|ma|une) (nouvelle |version revisee de la )?reponse\b",
        r"\b(mouvements?|coups?) (autorises|bloques|interdits)\b",
        r"\ben tant que modele de langage\b",
    ],
    "es": [
        r"\b(el|la|los|las) (json|esquema|prompt|brief|usuario|usuaria|instrucciones|salida)\b",
        r"\bla respuesta (es|fue|debe|contiene)\b",
        r"\b(aqui esta|esta es) (la|mi|una) (nueva |revisada )?respuesta\b",
        r"\bmovimientos (permitidos|bloqueados|prohibidos)\b",
        r"\bcomo (un )?modelo de lenguaje\b",
    ],
    "pt": [
        r"\b(o|a|os|as) (json|esquema|prompt|brief|usuario|usuaria|utilizador|utilizadora|instrucoes|saida)\b",
        r"\ba resposta (e|foi|deve|contem)\b",
        r"\b(aqui esta|esta e) (a|minha|uma) (nova |revisada )?resposta\b",
        r"\bmovimentos (permitidos|bloqueados|proibidos)\b",
        r"\bcomo (um )?modelo de linguagem\b",
    ],
    "ru": [
        r"\b(json|схема|схеме|схемы|промпт|промпта|промпте|пользователь|пользователя|пользователю)\b",
        r"\bответ (такой|таков|был|следующий|должен)\b",
        r"\b(вот|это) (мой|новый|исправленный|итоговый) ответ\b",
        r"\b(разрешенные|запрещенные|заблокированные) (ходы|шаги|приемы)\b",
        r"\bкак (языковая|языковой) модел",
        r"\bинструкци(я|и|ю|ям|ями)\b",
    ],
}

# The reply talks to the coachee as if *they* were the coach (or speaks as the coachee).
ROLE_CONFUSION: dict[str, list[str]] = {
    "en": [
        r"^\W*(hi|hello|hey|dear|thanks|thank you|well done|great job|good job|ok|okay|yes|sure|great)\W+coach\b",
        r"\b(thanks|thank you|well done|great job|good job),? coach\b",
        r"\bcoach\W*$",
        r"\byou('re| are) (such )?(a|an|my|the|our)( \w+)? coach\b",
        r"\bas (a|my|our|a fellow) coach,? you\b",
        r"\byour (coachees|clients|coaching clients|coaching practice|coaching sessions with clients)\b",
        r"\b(as your coachee|i am your coachee|i'm your coachee|my coach (says|said|told|thinks|wants))\b",
    ],
    "de": [
        r"^\W*(hallo|hi|hey|liebe|lieber|liebes|danke|super|toll)\W+(coach|trainer|trainerin)\b",
        r"\b(du bist|sie sind) (ein|eine|mein|meine|unser|unsere)( \w+)? (coach|trainer|trainerin)\b",
        r"\b(deine|ihre) (klienten|klientinnen|coachees)\b",
        r"\bmein (coach|trainer) (sagt|meint|will)\b",
    ],
    "fr": [
        r"^\W*(bonjour|salut|merci|cher|chere|bravo)\W+coach\b",
        r"\b(tu es|vous etes) (un|une|mon|ma|notre|le|la)( \w+)? coach\b",
        r"\b(tes|vos) (clients|clientes|coaches)\b",
        r"\bmon coach (dit|pense|veut)\b",
    ],
    "es": [
        r"^\W*(hola|gracias|querido|querida|bravo)\W+(coach|entrenador|entrenadora)\b",
        r"\beres (un|una|mi|el|la)( \w+)? (coach|entrenador|entrenadora)\b",
        r"\b(tus|sus) (clientes|coachees)\b",
        r"\bmi (coach|entrenador) (dice|piensa|quiere)\b",
    ],
    "pt": [
        r"^\W*(ola|oi|obrigado|obrigada|querido|querida|parabens)\W+(coach|treinador|treinadora)\b",
        r"\b(voce e|tu es) (um|uma|meu|minha|o|a)( \w+)? (coach|treinador|treinadora)\b",
        r"\b(seus|teus) (clientes|coachees)\b",
        r"\bmeu (coach|treinador) (diz|acha|quer)\b",
    ],
    "ru": [
        r"^\W*(привет|здравствуйте|здравствуй|спасибо|дорогой|дорогая)\W+(коуч|тренер)\b",
        r"\b(ты|вы) (мой|моя|наш|хороший|отличный|настоящий)? ?(коуч|тренер)\b",
        r"\b(твои|ваши) (клиенты|подопечные|коучи)\b",
        r"\bмой (коуч|тренер) (говорит|считает|хочет)\b",
    ],
}

# Behaviours that a coachee's known risks make unsafe to encourage. `topic`: what marks the risk
# in the coachee's words or Stability's risks; `push`: a reply steering towards it. A recovering
# gambler must never be told to place "a small bet" as a reward, whatever a small model writes.
RISK_TOPICS: dict[str, dict[str, list[str]]] = {
    "gambling": {
        "topic": [
            r"\b(gambl\w*|betting|bets?|casino|poker|slots?|roulette|lottery|sports ?book|wager\w*)\b",
            r"\b(glucksspiel\w*|spielsucht|wetten|kasino|casino|lotto)\b",
            r"\b(jeux? d'argent|pari|paris sportifs|casino|loto)\b",
            r"\b(apuestas?|apostar|juego|casino|loteria|ludopatia)\b",
            r"\b(apostas?|apostar|jogo|cassino|casino|loteria)\b",
            r"\b(азарт\w*|ставк\w*|казино|лудомани\w*|букмекер\w*|лотере\w*)\b",
        ],
        "push": [
            r"\b(place|make|put|try|have|treat yourself to|reward yourself with) (a|one|another|your|some)( \w+)? "
            r"(bet|wager|flutter|spin|lottery ticket|scratch card|hand of poker)s?\b",
            r"\b(go|head|visit) (to )?(the|a) (casino|betting shop|bookie|bookmaker|racetrack)\b",
            r"\b(bet|wager|gamble) (on|a little|a bit|a small|small|responsibly)\b",
            r"\b(eine|einen|kleine|kleinen) (wette|einsatz)\b",
            r"\b(ins|in das|ins) (casino|kasino)\b",
            r"\b(un petit pari|parier un peu|aller au casino)\b",
            r"\b(una pequena apuesta|apostar un poco|ir al casino)\b",
            r"\b(uma pequena aposta|apostar um pouco|ir ao cassino|ir ao casino)\b",
            r"\b(сделайте|сделай|поставьте|поставь) (небольшую |маленькую )?ставку\b",
            r"\b(сходите|сходи) в казино\b",
        ],
    },
    "alcohol": {
        "topic": [
            r"\b(alcohol\w*|drinking|sober|sobriety|relapse|aa meeting|hangover)\b",
            r"\b(alkohol\w*|trocken|nuchtern|ruckfall)\b",
            r"\b(alcool\w*|sobre|sobriete|rechute)\b",
            r"\b(alcohol\w*|sobrio|sobriedad|recaida)\b",
            r"\b(alcool\w*|sobrio|sobriedade|recaida)\b",
            r"\b(алкогол\w*|пь(ю|ешь|ет|янство)|запо\w*|трезв\w*|срыв\w*)\b",
        ],
        "push": [
            r"\b(have|grab|enjoy|treat yourself to|reward yourself with|pour yourself) (a|one|another|some)( \w+)? "
            r"(drink|beer|wine|glass of wine|cocktail|shot|pint)s?\b",
            r"\b(ein|einen|ein kleines) (bier|glas wein|drink)\b",
            r"\b(un verre|une biere|un petit verre)\b",
            r"\b(una copa|una cerveza|un trago)\b",
            r"\b(uma bebida|uma cerveja|um copo de vinho|um drink)\b",
            r"\b(выпейте|выпей|выпить) (бокал|рюмку|пива|вина)\b",
        ],
    },
    "eating": {
        "topic": [
            r"\b(anorex\w*|bulim\w*|binge\w*|purg\w*|eating disorder|calories|not eating|skip(ping)? meals)\b",
            r"\b(magersucht|essstorung|kalorien|fressattack\w*)\b",
            r"\b(anorexie|boulimie|trouble alimentaire|calories)\b",
            r"\b(anorexia|bulimia|trastorno alimentario|calorias)\b",
            r"\b(anorexia|bulimia|transtorno alimentar|calorias)\b",
            r"\b(анорекси\w*|булими\w*|калори\w*|расстройство пищевого)\b",
        ],
        "push": [
            r"\b(skip|cut out|cut back on|fast through|go without) (a |your |the )?"
            r"(meal|meals|breakfast|lunch|dinner|food)\b",
            r"\b(count|track|cut|limit) (your )?calories\b",
            r"\b(fast|fasting) (for|until|today|tomorrow)\b",
            r"\b(mahlzeit|mahlzeiten|fruhstuck|abendessen) (auslassen|weglassen)\b",
            r"\b(sauter|supprimer) (un |le )?(repas|petit-dejeuner|diner)\b",
            r"\b(saltar|saltarte) (una |la )?(comida|cena|desayuno)\b",
            r"\b(pular|pule) (uma |a )?(refeicao|janta|cafe da manha)\b",
            r"\b(пропустите|пропусти|пропустить) (прием пищи|ужин|завтрак|обед)\b",
        ],
    },
    "spending": {
        "topic": [
            r"\b(debt|debts|overspend\w*|shopping addiction|compulsive (buying|shopping)|credit card)\b",
            r"\b(schulden|kaufsucht)\b",
            r"\b(dettes?|achats compulsifs)\b",
            r"\b(deudas?|compras compulsivas)\b",
            r"\b(dividas?|compras compulsivas)\b",
            r"\b(долг\w*|кредит\w*|шопоголи\w*)\b",
        ],
        "push": [
            r"\b(treat yourself to|reward yourself with|go on) (a |some )?"
            r"(shopping( spree)?|splurge|new (clothes|gadget))\b",
            r"\b(put it on|use) (your|the) credit card\b",
            r"\b(gonn dir|kauf dir) (etwas|was) (schones|neues)\b",
            r"\b(offrez-vous|faites-vous plaisir avec) (un|une|des) achats?\b",
            r"\b(date un capricho|ve de compras)\b",
            r"\b(se de um presente|va as compras)\b",
            r"\b(побалуйте себя покупкой|сходите за покупками)\b",
        ],
    },
}

# How a reply uses a pushing move without naming it, per move, in every product language: a
# blocked move is caught by its catalog name, its key or one of these word sequences (compared
# folded, so written without accents). Only checked while the move is blocked for the coachee.
MOVE_CUES: dict[str, list[str]] = {
    "deadline_commitment": [
        "set a deadline",
        "firm deadline",
        "by when will you",
        "commit to a date",
        "pick a date",
        "bis wann",
        "eine frist",
        "feste frist",
        "deadline setzen",
        "date limite",
        "d'ici quand",
        "fixe une echeance",
        "fixe-toi une date",
        "fecha limite",
        "para cuando lo",
        "ponte un plazo",
        "ate quando",
        "um prazo",
        "data limite",
        "крайнии срок",
        "к какому сроку",
        "дедлаин",
        "установи срок",
        "назначь срок",
    ],
    "stretch_goal": [
        "aim higher",
        "more ambitious",
        "raise the bar",
        "double your",
        "push yourself further",
        "hoher zielen",
        "ehrgeizigeres ziel",
        "die latte hoher",
        "verdopple",
        "viser plus haut",
        "plus ambitieux",
        "plus ambitieuse",
        "double ton",
        "apunta mas alto",
        "mas ambicioso",
        "mas ambiciosa",
        "duplica tu",
        "mirar mais alto",
        "mais ambicioso",
        "mais ambiciosa",
        "dobre sua",
        "dobre seu",
        "более амбициозную",
        "более амбициозныи",
        "подними планку",
        "поднимите планку",
        "удвои",
    ],
    "direct_challenge": [
        "no excuses",
        "stop making excuses",
        "be honest with yourself",
        "you keep saying",
        "stop lying to yourself",
        "keine ausreden",
        "hor auf mit den ausreden",
        "sei ehrlich zu dir",
        "pas d'excuses",
        "arrete de te trouver des excuses",
        "sois honnete avec toi",
        "sin excusas",
        "deja de poner excusas",
        "se honesto contigo",
        "sem desculpas",
        "pare de dar desculpas",
        "seja honesto consigo",
        "без оправдании",
        "хватит оправдываться",
        "перестань оправдываться",
        "будь честен с собои",
    ],
    "accountability_checkin": [
        "report back",
        "check in with me",
        "let me know by",
        "i will check on you",
        "berichte mir",
        "melde dich bis",
        "gib mir bis",
        "fais-moi un retour",
        "tiens-moi au courant d'ici",
        "rends-moi compte",
        "reportame",
        "avisame antes de",
        "rindeme cuentas",
        "me de um retorno",
        "me conte ate",
        "preste contas",
        "отчитаися",
        "доложи мне",
        "сообщи мне до",
    ],
}
