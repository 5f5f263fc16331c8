"""Crisis lexicon, batch 5: warning signs that the classifier scores just under its threshold.

Written from the clinical lists of warning signs (preparatory behaviour in the C-SSRS; the
relapse, concealment and self-punishment the self-harm and eating-disorder literature
describes), in every language, after reading what two sets by then run on several versions and
used for development still missed (tests/data/crisis_blind.tsv and crisis_probe.tsv): each
pattern is a concept, not one of their sentences. Measured afterwards on a third blind set that
no one tuning had read (tests/data/crisis_blind3.tsv; README, "Crisis safety").

- relapse into self-harm, also by the abbreviations its communities use (sh, сх, SVV); burning or
  hitting oneself; covering fresh cuts;
- giving a pet or one's things away under a cover story ("she thinks I'm moving"); returning
  everything borrowed; a last coffee with each friend;
- settling affairs: a will beside passwords, closed accounts, cancelled subscriptions;
- worth more dead, life insurance worth more than oneself; a letter "they will find";
- going back to a height: "next time I won't come down";
- no reason left to get up in the morning; not planning to be around;
- alcohol with one's pills, all at once;
- hiding that one no longer eats, pride in not eating, making oneself sick, laxatives;
- a farewell letter narrowed: one to a team, a boss or a class is not a goodbye to life.

Same seeding rules as every batch: added where (locale, pattern) is new, an operator's edit kept.
"""

from django.db import migrations

from agents.migrations._crisis_lexicon import add_patterns, replace_patterns

SEEDED_NOTE = "default lexicon, batch 5 (migration 0028)"

# "Get up" or "wake up" for a reason, not at an hour: "no point getting up early if it rains".
_MORNING_EN = r"(?! (early|at|before|so early|for (the|a|my) (gym|run|class|flight)))"
_MORNING_DE = r"(?! (um|so fruh|fur (das|den|die) (training|lauf|kurs|flug)))"
_MORNING_FR = r"(?! (a \d|si tot|pour (le|la|mon|ma) (sport|footing|cours|vol)))"
_MORNING_ES = r"(?! (a las|tan temprano|para (el|la|ir al) (gym|gimnasio|clase|vuelo)))"
_MORNING_PT = r"(?! (as \d|tao cedo|para (o|a|ir (ao|a|para)) (academia|treino|aula|voo)))"
_MORNING_RU = r"(?! (в \d|так рано|на (тренировку|пробежку|учебу|рейс)))"

# A farewell letter to a colleague who retires, a team one leaves, a class: not a goodbye to life
# (_NOT_TO_WORK_ES also reads Portuguese).
_NOT_TO_WORK_EN = r"(?! (for|to) (my |the |our )?(team|boss|colleagues?|co-?workers?|manager|class|students|clients?))"
_NOT_TO_WORK_ES = r"(?! (para|pra|a|de) \w+ (jef\w*|chef\w*|companer\w*|colega\w*|equipo|equipe|cliente\w*|alumn\w*|alun\w*))"
_NOT_TO_WORK_FR = r"(?! (a|pour) (mon|ma|mes|l'|notre|nos) ?(equipe|chef\w*|collegues?|patron\w*|classe|clients?))"
_FAREWELL_LETTERS = {
    "en": [r"\b(suicide|goodbye|farewell) (note|letter)s?\b", r"\b(goodbye|farewell|suicide) (letter|note)s?\b"],
    "es": [r"\bcarta de despedida\b", r"\bcartas? de despedida\b"],
    "pt": [r"\bcartas? de despedida\b"],
    "fr": [r"\blettre d'adieu\b", r"\blettres? d'adieu\b"],
}
_NOT_TO_WORK = {"en": _NOT_TO_WORK_EN, "es": _NOT_TO_WORK_ES, "pt": _NOT_TO_WORK_ES, "fr": _NOT_TO_WORK_FR}
REPLACED = {
    (locale, pattern): pattern + _NOT_TO_WORK[locale] for locale, patterns in _FAREWELL_LETTERS.items() for pattern in patterns
}

PATTERNS: dict[str, dict[str, list[str]]] = {
    "en": {
        "means": [
            r"\b(pills|tablets|meds|antidepressants|sleeping pills)\b.{0,40}\b(bottle of|with (vodka|whisky|wine|gin|rum))\b.{0,40}\b(all|at once|tonight)\b",
        ],
        "self_harm": [
            r"\b(cover|hide|conceal)\w*\b.{0,30}\b(fresh|new|recent) (cuts|wounds|burns)\b",
            r"\b(fresh|new|recent) (cuts|wounds|burns)\b.{0,30}\b(on my|cover|hide|no questions)\b",
            r"\b(relaps\w*|slipped up|broke my streak)\b.{0,40}\b(sh|self ?harm\w*|cutting|cut myself|burning myself)\b",
            r"\b(\d+|a few|two|three|four|five|six) (days?|weeks?|months?|years?) (clean|free) (from|of) "
            r"(sh|self ?harm\w*|cutting)\b",
            r"\b(burn|burned|burnt|burning|stub|stubbed|stubbing|put|putting) (out )?(a |the |my )?"
            r"(cigarettes?|lighter|lighters)\b.{0,25}\b(on|into|against) my (own )?(arms?|skin|wrists?|hands?|legs?|thighs?)\b",
            r"\b(burn|burned|burnt|burning) my (own )?(arms?|skin|wrists?|thighs?)\b.{0,30}\b(cigarettes?|lighter)\b",
            r"\b(punch|punching|punched|hit|hitting|slap|slapping|bang|banging)\b.{0,15}\b(myself|my own (head|face))\b"
            r"(?! (up|out|with (work|questions|guilt)))",
            r"\b(fists?)\b.{0,25}\b(my (own )?head)\b.{0,60}\b(bruises?|bruised|when i (mess|screw|make|get))",
        ],
        "suicide": [
            r"\b(worth more|more use(ful)?|better for (them|her|him|everyone)) dead\b",
            r"\blife insurance\b.{0,80}\b(than (me|i am|i'?d be)|worth more|more (use|useful)|some use)\b",
            r"(?!.*\b(surprise|birthday|gift|anniversary|christmas|valentine)\b)\b(letters?|note)\b.{0,60}\b(they'?ll|she'?ll|he'?ll|they will|she will|he will) find (it|them)\b",
            r"\b(returned|gave back|giving back|returning) (everything|all the (things|stuff)|all of it)\b.{0,25}\b(borrowed|lent me|i owed)\b",
            r"\b(one )?last (coffee|drink|beer|dinner|lunch|walk|pint) with each\b",
            r"\b(not planning|don'?t plan|dont plan|not planning on) (to be|on being) (around|alive|here)\b",
            r"\bunaliv\w*",
            r"\b(gave|giving|give|given|left|leaving|brought|took)\b.{0,60}\b(cat|dog|pets?|guitar|things|stuff|"
            r"belongings|plants?)\b.{0,80}\b(she|he|they|everyone|mum|mom|dad|people) (thinks?|believes?) "
            r"(i'?m|i am|im) (moving|leaving|emigrating|going (abroad|away|travelling))",
            r"\b(won'?t|wont|will not|not gonna|not going to) (be )?need(ing)? (it|them|those|any of (it|this|that))\b"
            r".{0,20}\bwhere i'?m going\b",
            r"\b(wrote|made|did|finished|updated|drew up|signed) (my|a) (will|testament)\b.{0,100}"
            r"\b(passwords?|closed (my )?(bank )?accounts?|cancel+ed (my )?\w*|subscriptions?|tidying up|loose ends)\b",
            r"\b(passwords?|pin)\b.{0,60}\b(will|testament)\b.{0,60}\b(cancel+ed|closed|sorted|tidying)\b",
            r"\bnext time\b.{0,30}\b(i )?(won'?t|will not|wont|not gonna|not going to) "
            r"(come|climb|step|walk|get) (back )?(down|back)\b",
            r"\b(no|any|what'?s the|whats the|don'?t see the|dont see the|can'?t see the|cant see the) "
            r"(point|reason|sense) (in |of |to )?(getting|get|waking|wake) up( in the mornings?| anymore| any more)?\b"
            + _MORNING_EN,
        ],
        "eating": [
            r"\b(haven'?t|havent|have not|didn'?t|not) (eaten|eat|had (anything|a (single )?meal|food))\b.{0,60}\b(proud|in control|deserve|disciplined)\b",
            r"\b(make|made|making) myself (throw up|sick|vomit|puke)\b",
            r"\b(laxatives?)\b.{0,60}\b(fat|every (night|day|evening)|after (eating|meals|dinner))\b",
            r"\b(say|tell (them|everyone|people|my \w+)|pretend|lie and say)\b.{0,20}\b(i'?ve|i have|i|i already) "
            r"(already )?(eaten|ate|had (lunch|dinner|breakfast|something))\b.{0,80}"
            r"\b(not true|a lie|isn'?t true|hasn'?t been true|haven'?t (eaten|had)|i don'?t eat|i haven'?t)\b",
        ],
    },
    "ru": {
        "means": [
            r"\b(запь\w*|запива\w*)\b.{0,40}\b(таблетк\w*|антидепрессант\w*|снотворн\w*)\b.{0,40}\b(коньяк\w*|водк\w*|вин\w*|бутылк\w*)",
            r"\b(таблетк\w*|антидепрессант\w*|снотворн\w*)\b.{0,40}\b(коньяк\w*|водк\w*|бутылк\w*)\b.{0,30}\b(все|всё) сразу\b",
        ],
        "self_harm": [
            r"\bсвеж\w* (порез\w*|шрам\w*|ожог\w*)",
            r"\b(сорвал\w*|срыв|рецидив)\b.{0,40}\b(сх\b|селфхарм\w*|самоповрежд\w*|порез\w*|резать себя)",
            r"\b(\d+|несколько|два|три|четыре|пять|полгода) (дн\w*|недел\w*|месяц\w*|лет|год\w*) без "
            r"(сх|селфхарма|самоповреждений|порезов)\b",
            r"\b(туш\w*|прижига\w*|обжига\w*|жг\w*)\b.{0,30}\b(сигарет\w*|зажигалк\w*)\b.{0,20}\b(о |на |об )?"
            r"(руку|руке|руки|кожу|коже|запясть\w*|бедр\w*|себя|себе)\b",
            r"\b(бью|бил\w*|ударяю|колочу)\b.{0,10}\b(себя|себе)\b.{0,30}\b(кулак\w*|по голове|по лицу|синяк\w*)",
        ],
        "suicide": [
            r"\b(застрахова\w*|страховк\w*)\b.{0,80}\b(польз\w* от меня|больше пользы|дороже,? чем я|чем я живой)",
            r"\b(стою|буду стоить) (больше|дороже) мертв\w*",
            r"\bписьм\w*\b.{0,60}\bнайд(ут|ет)\b",
            r"\bвернул\w* (все|всё),? что (брал\w*|занимал\w*|одалживал\w*)",
            r"\bпоследн\w* (кофе|чашк\w* кофе|раз|вечер\w*) с каждым\b",
            r"\b(отдал\w*|раздал\w*|отвез\w*|пристроил\w*)\b.{0,60}\b(кот\w*|кошк\w*|собак\w*|пса|гитар\w*|вещи)\b"
            r".{0,80}\b(думает|думают|считает|считают) (что )?(я )?(переезжаю|уезжаю|эмигрирую)",
            r"\b(написал\w*|составил\w*|оформил\w*) (завещание)\b.{0,100}\b(парол\w*|счет\w*|подписк\w*|долг\w*|дела)\b",
            r"\bв следующий раз\b.{0,30}\bне (спущусь|слезу|вернусь|отойду)",
            r"\b(зачем|нет смысла|не вижу смысла|какой смысл) (мне )?(вообще )?(вставать|просыпаться)( по утрам| утром)?\b"
            + _MORNING_RU,
            r"\bне хочу (больше |вообще )?просыпаться\b(?! (рано|в \d|так рано|на (работу|учебу)))",
        ],
        "eating": [
            r"\b(не ем|не ела|не ел|ничего не ел\w*)\b.{0,60}\b(горжусь|горда|горд|под контролем|заслуж\w*)",
            r"\b(вызыва\w*|вызвал\w*) (у себя )?рвот\w*",
            r"\b(опять|снова) (вырвал\w*|стошнил\w*) после (еды|обеда|ужина|завтрака)",
            r"\bслабительн\w*\b.{0,60}\b(толст\w*|каждый (день|вечер)|после еды)",
            r"\b(говорю|вру|отвечаю|делаю вид)\b.{0,20}\b(что )?(я )?(уже )?(поел\w*|пообедал\w*|позавтракал\w*|поужинал\w*)\b"
            r".{0,80}\b(неправда|вранье|не ем|не ела|не ел|не обедаю)\b",
        ],
    },
    "de": {
        "means": [
            r"\b(korn|schnaps|wodka|vodka|wein|whisky|alkohol|flasche)\b.{0,30}\b(zu|mit) (meinen|den|all meinen|allen) (tabletten|pillen|schlaftabletten|antidepressiva)",
        ],
        "self_harm": [
            r"\bfrische (schnitte|wunden|schnittwunden|brandwunden)\b",
            r"\b(beisse|beiss|kratze|kneife) mir\b.{0,20}\b(arm|haut|hand)\b.{0,30}\b(blau|blut\w*|bis)",
            r"\b(ruckfall\w*|ruckfallig)\b.{0,40}\b(svv|ritz\w*|geritzt|selbstverletz\w*|klinge)",
            r"\b(\d+|ein paar|zwei|drei|vier|funf|sechs) (tag\w*|woche\w*|monat\w*|jahr\w*) (ohne|clean von) "
            r"(svv|ritzen|selbstverletzung)\b",
            r"\b(zigarette\w*|feuerzeug)\b.{0,40}\b(am|auf (dem|meinem)|an meinem) (unter|ober)?arm\b",
            r"\b(druck\w*|verbrenn\w*)\b.{0,20}\b(mir|mich)\b.{0,30}\b(zigarette\w*|feuerzeug)",
            r"\b(schlag\w*|hau\w*|boxe)\b (mir|mich) (\w+ ){0,3}(faust )?(gegen|auf|an) (den|meinen) (kopf|schadel)\b",
            r"\bmit der faust\b.{0,20}\b(gegen|auf) (den|meinen) (eigenen )?kopf\b",
        ],
        "suicide": [
            r"\b(tot|als toter) (mehr wert|nutzlicher)\b",
            r"\blebensversicherung\b.{0,80}\b(als ich|mehr wert|mehr nutzen|nutzlicher)",
            r"(?!.*\b(uberraschung|geburtstag\w*|geschenk|jahrestag|weihnacht\w*)\b)\bbrief\w*\b.{0,60}\b(finden (sie|ihn|die)|(werden|wird) (sie|ihn|die|es)\b.{0,20}\bfinden|findet (ihn|sie))\b",
            r"\balles zuruck(gegeben|gebracht)\w*,? was ich (mir )?(geliehen|ausgeliehen)",
            r"\b(ein|einen) letzte[nr]? (kaffee|drink|bier|essen|spaziergang) mit (jedem|jeder)\b",
            r"\b(verabschiede|verabschiedet) mich\b.{0,30}\b(von allen|unauffallig|heimlich)",
            r"\b(gegeben|gebracht|verschenkt|abgegeben)\b.{0,80}\b(sie|er|alle|mama|papa) (denkt|denken|glaubt|glauben) "
            r"(ich )?(zieh\w*|ziehe|wandere|geh\w*) (um|aus|weg)\b",
            r"\b(hund|katze|kater|gitarre|sachen)\b.{0,60}\bfur immer\b.{0,60}\b(denkt|glaubt)\b",
            r"\btestament\b.{0,100}\b(passworter|passwort|konto|konten|aufgelost|gekundigt|abos?)\b",
            r"\bnachste(s)? mal\b.{0,30}\b(komm\w*|steig\w*|geh\w*) ich (nicht (mehr )?)(runter|zuruck)\b",
            r"\b(wofur|wozu|warum) ich (morgens |uberhaupt |eigentlich )*(noch )?aufstehe?n?\b",
            r"\b(kein(en)? grund|keinen sinn) (mehr )?(morgens )?(aufzustehen|aufzuwachen)\b" + _MORNING_DE,
        ],
        "eating": [
            r"\b(nichts (mehr )?gegessen|esse nichts|nichts zu mir genommen)\b.{0,60}\b(stolz|kontrolle|verdient)",
            r"\b(bringe|bring) mich (selbst )?zum (erbrechen|kotzen)|\bfinger in den hals\b",
            r"\b(abfuhr\w*)\b.{0,60}\b(fett|jeden (abend|tag)|nach dem essen)",
            r"\b(sag\w*|erzahl\w*|behaupt\w*|tu so)\b.{0,25}\b(ich )?(hatte|hab|habe) (schon )?(gegessen|"
            r"(zu )?mittag gegessen|gefruhstuckt)\b.{0,80}\b(stimmt nicht|gelogen|nicht wahr|esse (ich )?nicht|"
            r"nichts (mehr )?gegessen)",
        ],
    },
    "fr": {
        "means": [
            r"\b(cachets|comprimes|medocs|medicaments|antidepresseurs|somniferes)\b.{0,40}\b(bouteille|vodka|whisky|vin|alcool)\b.{0,40}\b(tout|d'un coup|ce soir)\b",
        ],
        "self_harm": [
            r"\b(coupures|blessures|cicatrices) (recentes|fraiches)\b",
            r"\b(nouvelles|fraiches) (coupures|blessures)\b",
            r"\b(rechute\w*|craque\w*)\b.{0,40}\b(sans (me faire (de |du )?mal|me scarifier|me couper)|scarif\w*|"
            r"automutil\w*|me faire (de |du )?mal)",
            r"\b(\d+|quelques|deux|trois|quatre|cinq|six) (jours?|semaines?|mois|ans?) (sans|clean de) "
            r"(me (scarifier|couper|faire (de |du )?mal)|scarif\w*|automutil\w*)",
            r"\b(cigarette\w*|clope\w*|briquet)\b.{0,40}\b(sur|contre) (mon|mes|ma) (bras|avant bras|peau|poignets?|cuisses?)\b",
            r"\b(me frappe|me tape|me cogne)\b.{0,20}\b(la tete|le visage|la figure)\b.{0,40}\b(expres|bleus?|quand je)",
        ],
        "suicide": [
            r"\b(vaux|vaudrais) (plus|mieux) mort\b",
            r"\bassurance[- ]?vie\b.{0,80}\b(que moi|plus (que|utile)|vivant)",
            r"(?!.*\b(surprise|anniversaire|cadeau|noel)\b)\blettres?\b.{0,60}\b(trouveront|trouvera)\b",
            r"\brendu tout ce qu'?(on|ils|elle|il) m'?(avai(en)?t|a) prete",
            r"\bun dernier (verre|cafe|repas|resto) avec (chacun|chacune)\b",
            r"\b(resilie|annule)\w*\b.{0,60}\b(plus besoin|vu ce que je (prevois|compte faire))",
            r"\b(donne|confie|laisse)\b.{0,60}\b(chat|chien|guitare|affaires)\b.{0,80}\b(elle|il|tout le monde|ils) "
            r"(croit|croient|pense|pensent) que je (demenage|pars|m'en vais|menvais|emigre)",
            r"\btestament\b.{0,100}\b(codes?|mots de passe|comptes?|abonnements?|resilie\w*|clotur\w*)",
            r"\b(la )?prochaine fois\b.{0,30}\bje (ne )?(redescends|redescendrai|reviens|reviendrai) pas\b",
            r"\b(plus|aucune|pas de|pas d'|quelle) (l'?interet|raison|sens) (de|a) (me lever|me reveiller|se lever)\b"
            + _MORNING_FR,
            r"\bje vois plus (l'?interet|la raison|le sens) (de|a) me lever\b",
        ],
        "eating": [
            r"\b(rien mange|pas mange|je mange (plus|rien))\b.{0,60}\b(fier|fiere|controle|merite)",
            r"\bme (fais|suis fait|suis faite) vomir\b",
            r"\blaxatifs?\b.{0,60}\b(grosse|gros|chaque (soir|jour)|apres (manger|les repas))",
            r"\b(dis|raconte|fais croire|pretends)\b.{0,25}\b(que )?j'?ai (deja )?(mange|dejeune|dine)\b.{0,80}"
            r"\b(faux|pas vrai|mensonge|je (ne )?mange (plus|pas))",
        ],
    },
    "es": {
        "means": [
            r"\b(pastillas|antidepresivos|somniferos|calmantes)\b.{0,40}\b(botella|vodka|whisky|vino|alcohol)\b.{0,40}\b(todas|de golpe|esta noche)\b",
        ],
        "self_harm": [
            r"\bcortes (recientes|frescos|nuevos)\b",
            r"\b(recai\w*)\b.{0,40}\b(autolesi\w*|cortarme|me corte|hacerme dano|lastimarme)",
            r"\b(\d+|unos|dos|tres|cuatro|cinco|seis) (dias|semanas|meses|anos) (sin|limpia? de) "
            r"(autolesion\w*|cortarme|hacerme dano|lastimarme)",
            r"\b(cigarr\w*|mechero|encendedor)\b.{0,40}\b(en|contra) (el|mi|mis|la) (brazo|brazos|piel|muneca|munecas|muslo)\b",
            r"\b(me doy|me pego|me golpeo)\b.{0,20}\b(punetazos|golpes|en la cabeza|contra la pared)\b",
        ],
        "suicide": [
            r"\b(valgo|valdria) mas muert[oa]\b",
            r"\bseguro de vida\b.{0,80}\b(que yo|mas (que|util)|viv[oa])",
            r"(?!.*\b(sorpresa|cumpleanos|regalo|aniversario|navidad)\b)\bcartas?\b.{0,60}\b(la encontrar\w*|las encontrar\w*|van a encontrar|encontrar(an|a))\b",
            r"\bdevolv\w* todo lo que (me )?(habian|habia|han|ha) prestado",
            r"\b(un|una) ultim[oa] (cafe|copa|cerveza|cena|caña) con (cada uno|cada una)\b",
            r"\b(mensaje|carta)\b.{0,40}\bpara despedirme\b",
            r"\b(di|regale|deje|lleve)\b.{0,60}\b(gato|perro|guitarra|cosas)\b.{0,80}\b(cree|creen|piensa|piensan) "
            r"que (me mudo|me voy|emigro)",
            r"\btestamento\b.{0,100}\b(contrasenas|claves|cuentas?|cancele|suscripciones|en orden)",
            r"\b(la )?proxima vez\b.{0,30}\bno (me bajo|bajo|vuelvo|me echo atras)\b",
            r"\b(ningun|no le veo|no tiene|sin|que) sentido (a |en )?(levantarme|despertarme)\b" + _MORNING_ES,
        ],
        "eating": [
            r"\b(no (he )?comido nada|no como nada|no como|sin comer)\b.{0,60}\b(orgullos[oa]|control|merezco)",
            r"\bme (hago|provoco) (vomitar|el vomito)\b",
            r"\blaxantes?\b.{0,60}\b(gord[oa]|todas las noches|todos los dias|despues de comer)",
            r"\b(digo|les digo|finjo|miento)\b.{0,25}\b(que )?(ya )?(comi|almorce|cene|desayune)\b.{0,80}"
            r"\b(no es verdad|mentira|no como|falso)",
        ],
    },
    "pt": {
        "means": [
            r"\b(comprimidos|remedios|antidepressivos|calmantes)\b.{0,40}\b(garrafa|vodka|whisky|vinho|cachaca)\b.{0,40}\b(todos|de uma vez|hoje a noite)\b",
        ],
        "self_harm": [
            r"\bcortes (recentes|novos|frescos)\b",
            r"\b(recai\w*)\b.{0,40}\b(automutila\w*|autolesao|me cortar|me cortei|me machucar|machucar)",
            r"\b(\d+|alguns|algumas|dois|duas|tres|quatro|cinco|seis) (dias|semanas|meses|anos) (sem|limpa? de) "
            r"(automutila\w*|me cortar|me machucar|autolesao)",
            r"\b(queimo|queimei|apago|apaguei)\b.{0,20}\b(o |os |a |meu |minha )?(braco|bracos|pele|pulso|coxa)\b.{0,30}"
            r"\b(cigarro|isqueiro)",
            r"\b(cigarro|isqueiro)\b.{0,40}\b(no|nos|na) (meu |minha )?(braco|bracos|pele|pulso|coxa)\b",
            r"\b(dou|dei) (murros|socos|tapas)\b.{0,20}\b(na minha|em mim|na propria|na cabeca)",
        ],
        "suicide": [
            r"\b(valho|valeria) mais mort[oa]\b",
            r"\bseguro de vida\b.{0,80}\b(do que eu|mais (que|util)|viv[oa])",
            r"(?!.*\b(surpresa|aniversario|presente|natal)\b)\bcartas?\b.{0,60}\b(vao (encontrar|achar)|vai (encontrar|achar)|encontrar(ao|a))\b",
            r"\bdevolvi tudo (o )?que (tinha|me) (pegado emprestado|emprestad\w*|emprestaram)",
            r"\bum ultimo (cafe|chope|drink|jantar|copo) com (cada um|cada uma)\b",
            r"\b(doei|dei) (minhas|meus|as|os) (roupas|livros|coisas)\b.{0,60}\b(devolvi|fechando|nao vou precisar)",
            r"\b(dei|entreguei|deixei|levei)\b.{0,60}\b(gato|gata|cachorro|cao|guitarra|coisas)\b.{0,80}"
            r"\b(acha|acham|pensa|pensam) que (eu )?(vou (emigrar|me mudar|mudar|embora)|me mudo)",
            r"\btestamento\b.{0,100}\b(senhas|contas?|cancelei|assinaturas|em ordem|arrumando)",
            r"\b(da )?proxima vez\b.{0,30}\bnao (desco|volto|recuo)\b",
            r"\b(nenhum|nao vejo (mais )?|sem|que) sentido (em |de )?(acordar|levantar)\b" + _MORNING_PT,
        ],
        "eating": [
            r"\b(nao como|nao comi|sem comer)\b.{0,60}\b(orgulhos[oa]|controle|mereco)",
            r"\bnao mere\w+\b.{0,10}\b(jantar|almocar|lanchar|o jantar|o almoco)\b",
            r"\bme (faco|fiz|forco a) vomitar\b|\bprovoc\w* (o )?vomito\b",
            r"\blaxantes?\b.{0,60}\b(gord[oa]|toda noite|todo dia|depois de comer)",
            r"\b(digo|falo|finjo|minto)\b.{0,25}\b(que )?(ja )?(comi|almocei|jantei)\b.{0,80}"
            r"\b(nao e verdade|mentira|nao como|falso)",
        ],
    },
}


def seed(apps, schema_editor):
    CrisisPattern = apps.get_model("agents", "CrisisPattern")
    replace_patterns(CrisisPattern, REPLACED)
    add_patterns(CrisisPattern, PATTERNS, SEEDED_NOTE)


def unseed(apps, schema_editor):
    apps.get_model("agents", "CrisisPattern").objects.filter(note=SEEDED_NOTE).delete()


class Migration(migrations.Migration):
    dependencies = [("agents", "0027_drop_change_stamps")]
    operations = [migrations.RunPython(seed, unseed)]
