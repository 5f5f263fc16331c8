"""Crisis lexicon, batch 4: wording by concept rather than by phrase, in every language.

The earlier batches were mostly phrases, and a held-out set written after them showed the cost:
the patterns caught 1 of its 60 crisis messages. These are written from what crisis wording is
made of (a wish or decision + dying, not existing or not waking; an ending + a time; goodbyes
and preparations; a question about amounts, heights or ways; hurting oneself on purpose; not
eating because one does not deserve it; being hit, threatened, locked in or controlled), each
allowing the words between that real messages put there. Written from clinical screening
wording (C-SSRS kinds) and the training data, never from the evaluation or held-out sets;
figurative uses ("dying of laughter", "this deadline is killing me", "cut my hair") are ruled
out where a pattern would otherwise take them. Same seeding rules as batch 3 (migration 0018).
"""

from django.db import migrations, models

from agents.migrations._crisis_lexicon import add_patterns, replace_patterns

SEEDED_NOTE = "default lexicon, batch 4 (migration 0020)"

# Words that turn "die"/"morir"/"умереть" into an idiom right after it ("dying of laughter",
# "dying to see", "die on this hill", "dying my hair").
_EN_IDIOM = r"(?! (of|from|laughing|for|on (this|that) hill|(my|her|his|the|it) hair|to (see|know|try|get|go|have|hear|meet|tell)))"
_FR_IDIOM = r"(?! (de|d'|a force)\b)"
_ES_IDIOM = r"(?! (de|del)\b)"
_PT_IDIOM = r"(?! (de|do|da)\b)"
_RU_IDIOM = r"(?! (от|со|с|за) )"
# Up to four words between a wish and what is wished, none of them a negation or a thing
# that can "die" (a phone, a battery, a plant): "I hope my phone doesn't die" is not a crisis.
_EN_BETWEEN = r"( (?!(not|dont|never|wont|doesnt|didnt|no|phone|battery|laptop|plants?|car|it)\b)\w+){0,4}"
_RU_BETWEEN = r"( (?!(не|чтобы|он|она|они|телефон)\b)\w+){0,3}"
_WAKE_EN = r"(?! (early|at|before|in time|late|so|up (early|at|before|in time|late)))"
_WAKE_ES = r"(?! (temprano|tarde|a las|antes))"
_WAKE_PT = r"(?! (cedo|tarde|as|antes))"
_WAKE_FR = r"(?! (tot|tard|a|avant))"
_PLACE_EN = r"(?! (in|at|with|for|near|like|there|on|early|so|before|after|alone|together|this|that))"
_PLACE_ES = r"(?! (en|con|sin|aqui|alli|solo|sola|cerca|lejos|de alquiler|trabajando))"
_PLACE_PT = r"(?! (em|com|sem|aqui|ali|so|sozinh\w*|perto|longe|de aluguel|no|na|nesse|nessa|neste|nesta))"
_PLACE_RU = r"(?! (в|во|на|без|с|со|у|так|здесь|там|одна|один|вместе|рядом|рано))"
_ALL_ES = r"(?! (el|lo|esto|eso|los|las|mi|mis|este|esta))"
_ALL_PT = r"(?! (o|isso|aquilo|os|as|que|meu|minha|esse|essa))"
# "My last message for today": a sign-off, not a goodbye.
_FOR_NOW_EN = r"(?! (for (today|tonight|now|the (day|week))|today|tonight|before|until|till|this (week|year)))"
_FOR_NOW_RU = r"(?! (на сегодня|сегодня|до|перед|на этой неделе|в этом году))"
_FOR_NOW_DE = r"(?! (fur heute|heute|vor|bis|diese woche))"
_FOR_NOW_FR = r"(?! (pour (aujourd'hui|ce soir|la journee|cette semaine)|aujourd'hui|avant|jusqu))"
_FOR_NOW_ES = r"(?! (por hoy|de hoy|hoy|antes|hasta|esta semana))"
_FOR_NOW_PT = r"(?! (por hoje|de hoje|hoje|antes|ate|esta semana|essa semana))"
_FINIR = r"(?! avec (ce|cette|ces|le|la|les|mon|ma|mes|un|une|son|sa|ses|l')\b)"

PATTERNS: dict[str, dict[str, list[str]]] = {
    "en": {
        "suicide": [
            r"\b(want|wanna|wish|wished|wishing|hope|hoping|pray|praying|plan|planning|ready|decided|deciding)\b"
            + _EN_BETWEEN
            + r" (to )?(die|be dead|not exist|stop existing|not be alive|never wake up|not wake up|kill myself|"
            r"don'?t wake up|end my life|take my (own )?life|end it all|go to sleep forever|sleep forever|disappear forever|"
            r"disappear for good)\b" + _EN_IDIOM + _WAKE_EN,
            r"\b(thinking|think|thought|fantasi[sz]e|fantasi[sz]ing|dream|dreaming) (about|of) (dying|being dead|"
            r"ending (it|my life|things)|killing myself|not (being here|existing|waking up)|suicide)\b",
            r"\b(end|ending|finish|finishing) (it|things|everything|it all|my life)\b.{0,30}"
            r"\b(tonight|this weekend|for good|forever|once and for all)\b",
            r"\b(tonight|this weekend)\b.{0,30}\b(end|ending) (it|things|it all|my life)\b",
            r"\bend it all\b",
            r"\b(unalive|sewerslide|self ?delete)\b",
            r"\bcheck(ing)? out (for good|permanently|of life)\b",
            r"\b(won'?t|will not|wont|not going to) (be (here|around|alive)|last) (much longer|for (much )?long(er)?)\b",
            r"\b(won'?t|will not|wont) (see|make it to) (christmas|my birthday|next year|the new year|another (year|birthday))\b",
            r"\bthis is my (last|final) (message|goodbye|post)\b" + _FOR_NOW_EN,
            r"\b(my|these are my) (last|final) words\b(?! (in|at|of) (the|my|this))",
            r"\b(suicide|goodbye|farewell) (note|letter)s?\b",
            r"\bthis is (my )?goodbye\b",
            r"\b(sleep|fall asleep|go to sleep)\b.{0,15}\b(and )?(never|not) (wake|waking)( up)?( again)?\b" + _WAKE_EN,
            r"\bnever wake up again\b",
            r"\bbetter off (dead|without me)\b",
            r"\b(when|once|after) i('m| am) (dead|gone for good|no longer (here|alive|around))\b",
            r"\bif i (was|were|died|disappeared)( gone| dead)?\b.{0,30}\b(notice|care|miss me|better|easier|happier)\b",
            r"\b(no|any|what'?s the|whats the) (point|reason|sense) (in |of |to )?(living|being alive|existing|"
            r"staying alive|waking up|live)\b" + _PLACE_EN,
            r"\b(life|my life) (isn'?t|is not|is no longer|doesn'?t feel) worth (living|it any ?more|anything)\b",
            r"\bnot worth living\b",
            r"\b(don'?t|do not|dont) want to (live|exist|be alive|wake up|be here)( any ?more)?\b" + _PLACE_EN,
            r"\bwant (it|everything|this|the pain|all of it) to (stop|end) (for good|forever|permanently)\b",
            r"\b(not|won'?t) be a (burden|problem)( to (anyone|you|them|my family))? (much|for (much )?)?(longer|long)\b",
            r"\bdisappear (forever|for good|permanently)\b",
            r"\b(can'?t|cannot|don'?t want to) (go on|keep going|carry on) (living|like this any ?more|any ?more)\b"
            r".{0,40}\b(die|dead|end|exist|alive)\b",
            r"\b(everyone|everybody|they|my (family|kids|wife|husband|parents))\b.{0,30}\b(better|happier|easier)\b"
            r".{0,20}\b(without me|if i (was|were|wasn'?t|weren'?t) (gone|dead|here|around|alive))\b",
        ],
        "means": [
            r"\bhow (many|much)\b.{0,50}\b(to (die" + _EN_IDIOM + r"|overdose|not wake|never wake|kill (me|myself|a person|someone))|"
            r"be fatal|be lethal|is fatal|is lethal|(a|an) (fatal|lethal) (dose|amount))\b",
            r"\bhow (high|tall|far)\b.{0,40}\b(to die|survive (a|the) fall|to kill|be fatal|is fatal)\b",
            r"\b(highest|tallest) (bridges?|car parks?|parking (garages?|decks?))\b",
            r"\b(bridges?|buildings?|roofs?|cliffs?|towers?)\b.{0,40}\b(higher|taller) than \d+",
            r"\b(stockpil\w*|saving up|saved up|collecting|collected|hoarding|hoarded|been keeping)\b.{0,20}"
            r"\b(pills|tablets|meds|medication|sleeping pills|painkillers|insulin)\b",
            r"\b(alcohol|vodka|wine|whisky|whiskey|booze|gin|rum|pills|tablets|meds|painkillers|sleeping pills)\b.{0,30}"
            r"\b(with|and)\b.{0,10}\b(alcohol|vodka|wine|whisky|whiskey|booze|pills|tablets|sleeping pills|meds|"
            r"painkillers)\b.{0,40}\b(die|dead|not wake|never wake|fatal|kill me|enough to|end it)\b",
            r"\b(take|swallow|taking|swallowing|took) (all|every one|the whole (bottle|pack|box)) (of )?(my |the )?"
            r"(pills|tablets|meds|painkillers)\b",
            r"(?<!bungee )(?<!base )\b(jump|jumping|step|stepping|throw myself) (off|from|in front of) (a |the |my )?"
            r"(bridge|roof|building|balcony|cliff|window|tower|ledge|train|bus|truck|car park|overpass)\b",
            r"\bin front of (a|the) (train|bus|truck|lorry)\b(?! (stop|station|driver|depot))",
            r"\b(painless|quick|quickest|easy|easiest|peaceful|surest|best|fastest) (way|ways|method|methods) "
            r"(to|of) (die|dying|end it|end my life|kill myself)\b",
            r"\b(buy|get|bought|got|getting|find)\b.{0,15}\b(a )?(gun|(?<!jump )(?<!skipping )rope|pistol|firearm|noose)\b"
            r".{0,40}\b(myself|end it|end my|for me to|done|last)\b",
            r"\bhow long\b.{0,30}\bwithout (water|food|eating|drinking)\b.{0,25}\b(die|dies|before|until)\b",
            r"\bhow (to|do (you|i|people)) (hang|overdose|drown|poison|shoot|suffocate|gas) (myself|yourself|themselves|oneself)\b",
        ],
        "self_harm": [
            r"\bself[ -]?(harm|harming|harmed|injur\w*|mutilat\w*)\b",
            r"\b(harm|harming|harmed) my ?self\b",
            r"\b(relapsed?|relapsing)\b.{0,40}\b(cut|cutting|self harm|blade|razor|burn|burning|hurting myself)\b",
            r"\b(blade|razor|razors)\b.{0,40}\b(only thing|calms?|relief|release|numb|feel something|"
            r"makes? (it|the noise|everything) stop)\b",
            r"\b(hide|hiding|hid|cover|covering) (up )?(the |my )?(scars|cuts|wounds|burns) (on|from me|from (my|her|him|them)|with)\b"
            r"(?! (acne|surgery))",
            r"\b(scars|cuts)\b.{0,20}\bon my (arms?|wrists?|thighs?|stomach)\b",
            r"\b(urge|urges|itch|craving) to (cut|burn|hurt|harm|hit) (myself|again)\b",
        ],
        "eating": [
            r"\b(haven'?t|have not|didn'?t|did not|hasn'?t) (eaten|eaten anything|had (any )?food|had anything to eat|"
            r"eaten a thing)( at all)? (in|for) (\w+ ){0,2}(days|a week|weeks)\b",
            r"\b(making|made|make|force|forcing|forced) my ?self (to )?(throw up|vomit|puke|purge)\b",
            r"\b(not|never) allow(ing)? my ?self to eat\b",
            r"\b(don'?t|do not|didn'?t) (deserve|earn|earned)\b.{0,10}\b(to eat|food|a meal|to drink|water)\b",
            r"\b(no|stopped|not) (drinking|water)\b.{0,20}\b(on purpose|deliberately|as punishment)\b",
            r"\b(punish|punishing) my ?self\b.{0,30}\b(food|eating|hunger|starv\w*|meal)\b",
        ],
        "abuse": [
            r"\b(slaps|slapped|chokes|choked|choking|punches|punched|shoves|shoved|strangles|strangled|smacks|smacked|raped|"
            r"rapes|molested) me\b",
            r"\b(he|she|partner|husband|wife|boyfriend|girlfriend|dad|father|mum|mom|mother|stepdad|stepfather|ex|brother)"
            r"\b.{0,30}\b(hit|hits|hitting|kicked|kicks|beat|beats|beating) me\b"
            r"(?! (at|in|to|by|on|back|hard|with|like|that|as|the|off|out))",
            r"\b(afraid|scared|terrified|frightened)\b.{0,15}\b(of )?(him|her)\b.{0,40}\b(home|hurt|drunk|hit)\b",
            r"\b(bruises?|black eye)\b.{0,40}\b(hide|hiding|cover|covering|long sleeves|make ?up|concealer|he did|she did|gave me)\b",
            r"\b(locks|locked|lock) me (in|out|up|inside)\b",
            r"\b(he|she|husband|wife|boyfriend|girlfriend|partner)\b.{0,30}\b(takes|took|controls|keeps|checks) my "
            r"(phone|money|bank|cards?|passport|keys|wages|salary)\b",
            r"\b(forced|forces|forcing|made) me (to have sex|into sex|to sleep with)\b",
            r"\bsexually (assaulted|abused) me\b",
            r"\b(threaten|threatens|threatened|threatening)\w* (to )?(hurt me|kill me|take the kids|beat me|hurt the kids)\b",
        ],
    },
    "ru": {
        "suicide": [
            r"\b(хочу|хочется|хотел\w*|хотелось бы|мечтаю|решил\w*|собираюсь|готов\w*|планирую)\b"
            + _RU_BETWEEN
            + r" (умереть" + _RU_IDIOM + r"|сдохнуть|не жить|не существовать|исчезнуть навсегда|уйти навсегда|"
            r"покончить|уснуть навсегда|заснуть навсегда|не проснуться|свести сч[её]ты|наложить на себя руки|"
            r"закончить (вс[её]|жизнь|с жизнью)|уйти из жизни|убить себя)",
            r"\b(думаю|подумываю|задумываюсь) (о том|о том чтобы) (умереть|уйти из жизни|покончить|не жить|свести сч[её]ты)",
            r"\b(подумываю|задумываюсь|думаю) о (самоубийстве|суициде)",
            r"\bналожить на себя руки\b",
            r"\bсвести сч[её]ты (с жизнью)?\b",
            r"\b(не|больше не|уже не) (хочу|могу|хочется) (жить|существовать|просыпаться)\b" + _PLACE_RU,
            r"\bжить (не хочу|не хочется|надоело|больше не хочу|не могу)\b(?! без)",
            r"\bнадоело (жить|существовать)\b" + _PLACE_RU,
            r"\b(зачем|для чего) мне (жить|просыпаться|существовать)\b",
            r"\bэто (мо[её] )?(последнее|прощальное) (сообщение|письмо)\b" + _FOR_NOW_RU,
            r"\b(меня скоро|скоро меня|меня больше) не станет\b",
            r"\bнедолго (мне )?осталось\b",
            r"\bвс[её]\b.{0,15}\b(закончил\w*|закончит\w*|кончил\w*|кончит\w*|прекратил\w*|прекратит\w*)\b.{0,10}\bнавсегда\b",
            r"\bне буду (больше |долго )?(обузой)\b",
            r"\b(сегодня|этой ночью|ночью|завтра)\b.{0,30}\b(покончу|закончу с собой|уйду из жизни)\b",
        ],
        "means": [
            r"\bсколько\b.{0,40}\b(нужно|надо|чтобы)\b.{0,30}\b(умереть" + _RU_IDIOM + r"|не проснуться|насмерть|отравиться)",
            r"\b(высот\w*|этаж\w*|метров)\b.{0,40}\b(насмерть|разбиться|умереть|выжить)\b",
            r"\bразбиться насмерть\b",
            r"\b(самые высокие|высокие|высоки\w*) мост",
            r"\bкакие мосты\b.{0,40}\b(выше|высок)",
            r"\b(коплю|копил\w*|накопил\w*|насобирал\w*|припрятал\w*|прячу)\b.{0,20}\b(таблет|снотворн|лекарств)",
            r"\b(таблет|снотворн|водк|алкогол|коньяк)\w*\b.{0,30}\b(с|и|запить)\b.{0,10}\b(водк|алкогол|вин|коньяк|таблет|снотворн)"
            r"\w*\b.{0,40}\b(умер|не проснут|насмерть|хватит|смерт)",
            r"\bспособ\w*\b.{0,10}\b(умереть|уйти из жизни|покончить|свести сч[её]ты)",
            r"\bбезболезненн\w* (смерть|уйти|умереть|способ)",
            r"\bлегк\w* смерть\b",
            r"\bкак (лучше |правильно |быстро |безболезненно )?(повеситься|отравиться|вскрыть вены|уйти из жизни)\b",
            r"\b(выпрыгнуть|выброситься|шагнуть|прыгнуть|броситься|лечь) (из окна|с крыши|с моста|с балкона|под поезд|под машину)\b",
            r"\bвскрыть (себе )?вены\b",
            r"\b(вер[её]вк|петл)\w*\b.{0,30}\b(шея|шею|повес|крюк|люстр)",
        ],
        "self_harm": [
            r"\bрежу (себя|руки|ноги|бедра|запястья|кожу)\b",
            r"\bрежусь\b",
            r"\b(специально|нарочно|намеренно)\b.{0,30}\b(порезал|режу|резала|обж[её]г|обожгл|царапа|бью себя|причин)\w*",
            r"\b(порезал|режу|резала|обж[её]г|обожгл|царапа)\w*\b.{0,30}\b(специально|нарочно|намеренно)\b",
            r"\b(шрам\w*|порез\w*)\b.{0,30}\b(скрыва\w*|прячу|прятать|длинн\w* рукав)",
            r"\bлезви\w*\b.{0,30}\b(успока|легче|облегч|единственн|чувств)",
            r"\bсорвал\w*\b.{0,30}\b(порезал|резать|режу|селфхарм|лезви)",
            r"\b(тянет|хочется|хочу)\b.{0,15}\b(порезать себя|резать себя|сделать себе больно)\b",
        ],
        "eating": [
            r"\b(ничего не ем|не ем ничего|ничего не ел\w*|не ел\w* ничего)\b.{0,20}\b(дн|дня|дней|недел|сутк)",
            r"\bне заслуживаю\b.{0,15}\b(есть|еды|еду|пищи|поесть|ужин|обед|завтрак)\b",
            r"\bвызыва\w* (у себя )?рвоту\b",
            r"\bдва пальца в рот\b",
            r"\b(не пью|перестал\w* пить) (воду|воды)\b.{0,20}\b(специально|нарочно|наказ)",
        ],
        "abuse": [
            r"\b(бь[её]т|избивает|избил\w*|ударил\w*|душит|душил\w*|пинает|изнасиловал\w*|насилует)\b.{0,5}\bменя\b",
            r"\bменя\b.{0,10}\b(бь[её]т|бьют|избива\w*|избил\w*|душил\w*|изнасиловал\w*)\b",
            r"\bсиня\w*\b.{0,30}\b(прячу|скрыва\w*|замазыва\w*|тональн\w*|от него|от не[её]|муж|парень|отец|отчим)",
            r"\bзапира\w* меня\b",
            r"\b(он|она|муж|жена|парень)\b.{0,20}\bзабира\w* (у меня )?(телефон|деньги|паспорт|карт)",
            r"\bбоюсь (мужа|парня|отца|отчима|бывшего)\b",
            r"\bугрожа\w*\b.{0,20}\b(убить|убь[её]т|покалечит|забрать детей)",
        ],
    },
    "de": {
        "suicide": [
            r"\b(will|mochte|wunsche mir|wurde gern|wurde lieber|hoffe|plane|habe vor|bin bereit|sehne mich danach)\b"
            r"( \w+){0,4} (zu )?(sterben|tot (zu )?sein|nicht mehr (zu )?leben|nicht mehr (zu )?existieren|"
            r"einzuschlafen und nicht|einschlafen und nicht|nie wieder aufzuwachen|nie wieder aufwachen|"
            r"mein leben (zu )?beenden|mich umzubringen|mich umbringen|mir das leben (zu )?nehmen)\b",
            r"\bdenke\b.{0,15}\b(ans sterben|an selbstmord|an suizid|mich umzubringen|mein leben zu beenden|"
            r"nicht mehr (zu )?leben)\b",
            r"\b(will|mochte|mag|kann) nicht mehr leben\b",
            r"\bkeine lust mehr (zu leben|auf das leben|auf leben|auf mein leben)\b",
            r"\b(suizid|selbstmord|freitod)\w*",
            r"\bdas (ist|wird) meine letzte nachricht\b" + _FOR_NOW_DE,
            r"\bnicht mehr lange zur last\b",
            r"\b(heute nacht|heute abend|morgen|am wochenende)\b.{0,30}\b(mein leben beenden|mich umbringen|mir das leben nehmen)\b",
            r"\b(dem ganzen|meinem leben|allem) ein ende (setzen|machen|bereiten)\b",
            r"\bfur immer einschlafen\b",
            r"\bkeinen sinn (mehr )?(zu leben|weiterzuleben|im leben)\b",
            r"\bwenn ich nicht mehr da (bin|ware)\b.{0,30}\b(besser|leichter|einfacher)\b",
        ],
        "means": [
            r"\bwie viele?\b.{0,40}\b(um|bis|damit)\b.{0,30}\b(sterben|tot|nicht mehr aufzuwachen|nicht mehr aufwache)",
            r"\b(wie hoch|welche hohe|ab welcher hohe)\b.{0,40}\b(todlich|sterben|uberleben|tot)\b",
            r"\b(hochste|hohe)n? (brucke|brucken)\b",
            r"\b(alkohol|wodka|wein|schnaps|tabletten|schlaftabletten|pillen)\b.{0,30}\b(mit|und)\b.{0,10}"
            r"\b(alkohol|wodka|wein|schnaps|tabletten|schlaftabletten|pillen)\b.{0,40}\b(sterben|tot|aufwachen|todlich|reicht)",
            r"\b(gesammelt|sammle|horte|gehortet|gebunkert|bunkere)\b.{0,30}\b(tabletten|pillen|medikamente|schlaftabletten)\b",
            r"\b(tabletten|pillen|medikamente|schlaftabletten)\b.{0,30}\b(gesammelt|sammle|gehortet|gebunkert)\b",
            r"\bvor (einen|den) zug\b",
            r"\b(vom|von der|von einer) (dach|balkon|hochhaus|turm|brucke) (zu )?springen\b",
            r"\b(schmerzlos\w*|schnellst\w*|sicherst\w*)\b.{0,20}\b(sterben|umbringen)\b",
            r"\bmich (\w+ )?(aufhangen|erhangen)\b",
            r"\bstrick\b.{0,30}\b(hals|aufhangen|dachboden|balken)\b",
        ],
        "self_harm": [
            r"\b(ritze mich|mich (\w+ )?(ritzen|geritzt)|hab\w* (mich )?geritzt|kratze mich (blutig|auf)|schlage mich selbst)\b",
            r"\b(mit absicht|absichtlich)\b.{0,30}\b(verletzt|geschnitten|geritzt|verbrannt|wehgetan|weh getan|geschlagen)\b",
            r"\bnarben\b.{0,30}\b(verstecke|verstecken|verdecke|lange armel|langen armeln|armel)\b",
            r"\bruckfall\b.{0,30}\b(geritzt|ritzen|klinge)\b",
            r"\b(rasier)?klinge\w*\b.{0,40}\b(beruhigt|einzige|erleichter\w*)\b",
        ],
        "eating": [
            r"\b(seit|schon) (\w+ )?tag\w*\b.{0,20}\bnichts (mehr )?gegessen\b",
            r"\bnichts (mehr )?gegessen\b.{0,20}\bseit (\w+ )?tag",
            r"\b(bringe|zwinge) mich (\w+ )?(zum erbrechen|zu erbrechen|zu kotzen|mich zu ubergeben)\b",
            r"\bfinger in den hals\b",
            r"\bverdiene (es )?nicht,? (zu essen|etwas zu essen)\b",
            r"\bverdiene kein essen\b",
        ],
        "abuse": [
            r"\b(verprugelt|wurgt|tritt|schubst|vergewaltigt|vergewaltigte|verhaut)\b.{0,5}\bmich\b",
            r"\bmich\b.{0,15}\b(geschlagen|verprugelt|gewurgt|vergewaltigt|getreten)\b",
            r"\bblaue flecken\b.{0,40}\b(verstecke|uberschmink\w*|schminke|armel)\b",
            r"\bsperrt mich (ein|aus)\b",
            r"\bnimmt mir (das handy|mein handy|das geld|mein geld|den pass|die karte)\b",
            r"\bdroht\w*\b.{0,20}\b(umzubringen|zu toten|die kinder|mir weh)\b",
            r"\bangst vor (ihm|ihr)\b",
        ],
    },
    "fr": {
        "suicide": [
            r"\b(veux|voudrais|aimerais|souhaite|reve de|compte|suis pret\w*|ai decide de|envie de)\b"
            r"( \w+){0,4} (mourir" + _FR_IDIOM + r"|crever" + _FR_IDIOM + r"|disparaitre pour (toujours|de bon)|"
            r"ne plus exister|ne plus etre la|en finir" + _FINIR + r"|me suicider|me tuer(?! a la tache| au travail)|"
            r"mettre fin a (mes jours|ma vie)|ne (pas|plus) me reveiller" + _WAKE_FR + r"|dormir pour toujours|"
            r"partir pour toujours)",
            r"\bpense (a|au fait de) (mourir|me tuer|me suicider|en finir" + _FINIR + r"|disparaitre)\b",
            r"\bplus (envie|la force) de vivre\b",
            r"\bmarre de (la vie|vivre|exister)\b(?! (en|a|ici|la|dans|avec|sans|seul))",
            r"\bne (veux|veut|peux) plus vivre\b(?! (en|a|ici|la|dans|avec|sans|seul|comme))",
            r"\b(c'est|ceci est) mon dernier message\b" + _FOR_NOW_FR,
            r"\bje ne serai (bientot )?plus la\b(?! (la|le|en|a|au|pour|apres|demain|lundi|mardi|mercredi|jeudi|"
            r"vendredi|samedi|dimanche|cet|cette|ce)\b)",
            r"\b(ce soir|cette nuit|demain)\b.{0,30}\b(en finir" + _FINIR + r"|mettre fin a mes jours|me tuer|me suicider)\b",
            r"\b(en finir" + _FINIR + r"|mettre fin a mes jours|me suicider)\b.{0,30}\b(ce soir|cette nuit|demain)\b",
            r"\bplus (pour )?(tres )?longtemps\b.{0,30}\b(poids|fardeau)\b",
            r"\b(poids|fardeau)\b.{0,30}\bplus (pour )?(tres )?longtemps\b",
            r"\b(plus de|aucun) sens\b.{0,20}\b(vivre|ma vie|me reveiller)\b",
        ],
        "means": [
            r"\bcombien\b.{0,40}\b(pour|afin de)\b.{0,20}\b(mourir" + _FR_IDIOM + r"|ne (pas|plus) me reveiller|ne pas se reveiller|"
            r"en finir" + _FINIR + r")\b",
            r"\b(quelle hauteur|hauteur)\b.{0,40}\b(mortel\w*|mourir|survivre|tuer)\b",
            r"\b(plus hauts?|hauts) ponts?\b",
            r"\b(alcool|vodka|vin|whisky|cachets|comprimes|medicaments|somniferes)\b.{0,30}\b(avec|et)\b.{0,10}"
            r"\b(alcool|vodka|vin|whisky|cachets|comprimes|medicaments|somniferes)\b.{0,40}\b(mourir|reveiller|mortel|suffi)",
            r"\b(stock\w*|accumul\w*|mis de cote|economis\w*)\b.{0,30}\b(cachets|comprimes|medicaments|somniferes)\b",
            r"\b(sauter|me jeter)\b.{0,20}\b(du pont|d'un pont|du toit|par la fenetre|sous (un|le) train|du balcon)\b",
            r"\b(moyen|maniere|facon|methode)s? (la plus |le plus )?(rapide|douce|sure|indolore)s? (de|pour) "
            r"(mourir|en finir" + _FINIR + r")\b",
            r"\bme pendre\b",
            r"\bcorde\b.{0,30}\b(cou|pendre|poutre)\b",
        ],
        "self_harm": [
            r"\bscarif\w*",
            r"\bme mutile\w*",
            r"\bexpres\b.{0,30}\b(coupe|brule|fait mal|frappe|blesse)\w*",
            r"\b(coupe|brule|fait mal|frappe|blesse)\w*\b.{0,30}\b(expres|volontairement)\b",
            r"\b(cicatrices|coupures)\b.{0,30}\b(cache\w*|manches longues)\b",
            r"\blame\b.{0,30}\b(calme|soulage|seule chose)\b",
            r"\brechute\b.{0,30}\b(coupe|scarif|lame)\w*",
        ],
        "eating": [
            r"\b(pas|rien) mange\b.{0,20}\bdepuis (\w+ )?jours\b",
            r"\bmerite pas\b.{0,15}\b(manger|nourriture|repas|de manger)\b",
            r"\bme (faire|fais|force a) vomir\b",
            r"\bdoigts dans la gorge\b",
        ],
        "abuse": [
            r"\b(il|elle|mari|femme|copain|copine|pere|mere|ex|beau pere|conjoint)\b.{0,20}\bme (frappe|bat|battait|gifle|giflait|"
            r"etrangle|etranglait|cogne|viole|a violee?|a frappee?|a battue?|enferme)\b(?! (a|aux|au|en|toujours)\b)",
            r"\bpeur de (rentrer|retourner) (a la maison|chez moi|chez nous)\b",
            r"\bpeur de lui\b(?! (dire|parler|demander|annoncer|avouer|montrer|ecrire|poser|faire|expliquer|repondre|en)\b)",
            r"\bbleus\b.{0,40}\b(cache\w*|maquill\w*|manches longues)\b",
            r"\b(il|elle)\b.{0,10}\b(me )?(prend|confisque|controle) mon (telephone|argent|portable)\b",
            r"\bmenace de me (tuer|frapper)\b",
        ],
    },
    "es": {
        "suicide": [
            r"\b(quiero|quisiera|me gustaria|deseo|he decidido|tengo ganas de|ganas de)\b( \w+){0,4} "
            r"(morir" + _ES_IDIOM + r"|morirme" + _ES_IDIOM + r"|matarme|suicidarme|desaparecer para siempre|"
            r"dejar de existir|no existir|no despertar" + _WAKE_ES + r"|dormir para siempre|acabar con todo" + _ALL_ES + r"|"
            r"quitarme la vida|terminar con todo" + _ALL_ES + r"|no estar aqui" + _PLACE_ES + r")",
            r"\b(pienso|pensando|pense) en (morir|morirme|matarme|suicidarme|quitarme la vida|acabar con todo" + _ALL_ES + r"|"
            r"desaparecer)\b",
            r"\bvoy a (matarme|suicidarme|quitarme la vida|acabar con todo" + _ALL_ES + r")",
            r"\bno quiero (seguir )?vivir\b" + _PLACE_ES,
            r"\bno quiero seguir (aqui|existiendo)\b" + _PLACE_ES,
            r"\b(cansad[oa]|hart[oa]) de (vivir|existir)\b" + _PLACE_ES,
            r"\bya no quiero estar aqui\b" + _PLACE_ES,
            r"\b(este es|es) mi ultimo mensaje\b" + _FOR_NOW_ES,
            r"\bpronto no (estare|voy a estar)\b(?! (en|con|aqui en|para|disponible))",
            r"\bno sere una carga (por )?mucho\b",
            r"\b(esta noche|hoy|manana)\b.{0,30}\b(acabo con todo" + _ALL_ES + r"|me mato(?! (a|en|estudiando|trabajando|entrenando))|"
            r"termino con todo" + _ALL_ES + r"|me quito la vida)\b",
            r"\bcarta de despedida\b",
        ],
        "means": [
            r"\bcuant[oa]s?\b.{0,40}\b(para|hasta)\b.{0,20}\b(morir" + _ES_IDIOM + r"|no despertar|matarme|ser mortal|"
            r"no volver a despertar)\b",
            r"\b(que altura|altura)\b.{0,40}\b(mortal|morir|sobrevivir|matar)\b",
            r"\bpuentes?\b.{0,30}\b(mas altos?|de mas de \d+)\b",
            r"\b(alcohol|vodka|vino|whisky|ron|pastillas|somniferos|calmantes)\b.{0,30}\b(con|y)\b.{0,10}"
            r"\b(alcohol|vodka|vino|whisky|ron|pastillas|somniferos|calmantes)\b.{0,40}\b(morir|despertar|mortal|basta)",
            r"\b(acumul\w*|ahorr\w*|he juntado|voy juntando|junte)\b.{0,30}\b(pastillas|somniferos|calmantes)\b",
            r"\b(tirarme|lanzarme|saltar)\b.{0,20}\b(del puente|de un puente|del edificio|de la azotea|por la ventana|"
            r"al tren|a las vias|del balcon)\b",
            r"\bahorcarme\b",
            r"\b(forma|manera|metodo)s? (mas )?(rapid[oa]|facil|indolora|segura) de (morir|matarme)\b",
        ],
        "self_harm": [
            r"\bme (corto|corte|cortaba|quemo|queme|rasguno) (los brazos|las munecas|las piernas|los muslos|la piel)\b",
            r"\b(a proposito|adrede)\b.{0,30}\b(cort|quem|lastim|dano|golpe)\w*",
            r"\b(cort|quem|lastim|golpe)\w*\b.{0,30}\b(a proposito|adrede)\b",
            r"\bcicatrices\b.{0,30}\b(escond\w*|tapo|tapar|manga)",
            r"\bcuchilla\w*\b.{0,30}\b(alivi\w*|calm\w*|unica cosa|sentir)",
            r"\brecai\w*\b.{0,30}\b(cort\w*|cuchilla)",
        ],
        "eating": [
            r"\bno (he|e) comido\b.{0,20}\b(en|desde hace) (\w+ )?dias\b",
            r"\bno merezco (comer|comida)\b",
            r"\bme (provoco|hago) (el )?vomit\w*",
            r"\bdedos en la garganta\b",
        ],
        "abuse": [
            r"\b(el|ella|marido|novi[oa]|pareja|padre|madre|padrastro|ex|esposo|esposa)\b.{0,20}\bme (pega|pego|golpea|golpeo|"
            r"ahorca|estrangula|empuja|violo|viola|encierra)\b",
            r"\bmiedo de (volver|ir|regresar) a casa\b",
            r"\bmiedo (a|de) (mi pareja|mi marido|mi novio|mi padre|mi padrastro|mi esposo)\b",
            r"\bmoretones\b.{0,40}\b(escond\w*|tapo|maquill\w*)\b",
            r"\bme quita (el movil|el celular|el dinero|la plata|el pasaporte)\b",
            r"\bamenaza con matarme\b",
        ],
    },
    "pt": {
        "suicide": [
            r"\b(quero|queria|gostaria de|decidi|tenho vontade de|vontade de)\b( \w+){0,4} (morrer" + _PT_IDIOM + r"|me matar|"
            r"sumir de vez|sumir (pra|para) sempre|deixar de existir|nao existir|nao acordar" + _WAKE_PT + r"|"
            r"dormir (pra|para) sempre|acabar com tudo" + _ALL_PT + r"|tirar (a )?minha vida)",
            r"\b(penso|pensando|pensei) em (morrer" + _PT_IDIOM + r"|me matar|sumir|acabar com tudo" + _ALL_PT + r"|"
            r"tirar (a )?minha vida|nao acordar" + _WAKE_PT + r")",
            r"\bvou (me matar|acabar com (tudo" + _ALL_PT + r"|a minha vida)|tirar (a )?minha vida|me enforcar)\b",
            r"\b(nao|n) (quero|aguento) mais (viver|existir|estar aqui)\b" + _PLACE_PT,
            r"\bcansad[oa] de (viver|existir)\b" + _PLACE_PT,
            r"\bsem vontade de viver\b",
            r"\b(esta|essa) e (a )?minha ultima mensagem\b" + _FOR_NOW_PT,
            r"\bnao vou ser (um )?peso\b",
            r"\badeus\b.{0,20}\b(pra sempre|para sempre)\b",
            r"\b(hoje a noite|hoje|esta noite|essa noite|amanha)\b.{0,30}\b(acabo com tudo" + _ALL_PT + r"|"
            r"me mato(?! (de|no|na|estudando|trabalhando|malhando))|dou fim a minha vida|vou acabar com tudo" + _ALL_PT + r")",
            r"\b(por|dar) fim (a|na|em) (minha )?vida\b",
            r"\bdar cabo da (minha )?vida\b",
        ],
        "means": [
            r"\bquant[oa]s?\b.{0,40}\b(pra|para)\b.{0,20}\b(morrer" + _PT_IDIOM + r"|nao acordar|me matar|ser fatal|apagar de vez)\b",
            r"\b(que altura|altura)\b.{0,40}\b(fatal|morrer|sobreviver|matar)\b",
            r"\b(pontes?|viadutos?)\b.{0,30}\b(mais altos?|com mais de \d+)\b",
            r"\b(alcool|cachaca|vodka|vinho|comprimidos|remedios|calmantes|rivotril)\b.{0,30}\b(com|e)\b.{0,10}"
            r"\b(alcool|cachaca|vodka|vinho|comprimidos|remedios|calmantes|rivotril)\b.{0,40}\b(morrer|acordar|fatal|basta)",
            r"\b(acumul\w*|juntei|juntando|guardei escondid\w*)\b.{0,30}\b(comprimidos|remedios|calmantes)\b",
            r"\b(pular|me jogar|me atirar)\b.{0,20}\b(da ponte|de uma ponte|do predio|da janela|do viaduto|"
            r"na frente do (trem|metro|onibus|comboio))\b",
            r"\bme enforcar\b",
            r"\b(forma|jeito|maneira)s? (mais )?(rapid[oa]|facil|indolor|segur[oa]) de (morrer|me matar)\b",
        ],
        "self_harm": [
            r"\bme (corto|cortei|cortando|queimo|queimei|arranho) (os bracos|os pulsos|as pernas|as coxas|a pele)\b",
            r"\bde proposito\b.{0,30}\b(cort|queim|machuc|bat)\w*",
            r"\b(cort|queim|machuc)\w*\b.{0,30}\bde proposito\b",
            r"\bcicatrizes\b.{0,30}\b(escond\w*|manga)",
            r"\b(gilete|lamina)\b.{0,30}\b(alivi\w*|acalm\w*|unica coisa)",
            r"\brecai\w*\b.{0,30}\b(cort\w*|automutil\w*|gilete)",
        ],
        "eating": [
            r"\b(nao como|nao comi|sem comer)\b.{0,20}\b(ha|faz) (\w+ )?dias\b",
            r"\bnao mereco\b.{0,15}\b(comer|comida)\b",
            r"\b(me fa[cz]o|me forco a|me forcei a) vomitar\b",
            r"\bdedo na garganta\b",
        ],
        "abuse": [
            r"\b(ele|ela|marido|namorad[oa]|companheir[oa]|pai|mae|padrasto|ex)\b.{0,20}\bme (bate|bateu|agride|agrediu|"
            r"estrangul\w*|violentou|estuprou|tranca|trancou|espanca\w*)\b",
            r"\bmedo del[ea]\b",
            r"\b(hematomas?|marcas roxas)\b.{0,40}\b(escond\w*|maquiagem)\b",
            r"\b(ele|ela)\b.{0,10}\b(pega|toma|controla) (o )?meu (celular|dinheiro|telemovel)\b",
            r"\bamea[cç]\w* me matar\b",
        ],
    },
}

# Patterns of earlier batches narrowed where they took everyday lines of the training data
# ("bought a rope for the washing line", "burnt myself on the pan by accident", a farewell email
# to the team when changing jobs). An operator's own edit of the old pattern is left alone.
REPLACED = {
    ("en", r"\bdon'?t want to (live|be alive|wake up)\b"): r"\bdon'?t want to (live|be alive|wake up)\b" + _PLACE_EN,
    ("en", r"\bjump(ing)? (off|from) (a|the|this|that) (bridge|building|roof|cliff|balcony)\b"): (
        r"(?<!bungee )(?<!base )\bjump(ing)? (off|from) (a|the|this|that) (bridge|building|roof|cliff|balcony)\b"
    ),
    ("ru", r"\bкупил\w* вер[её]вку\b"): r"\bкупил\w* вер[её]вку\b(?! для (сушки|белья|палатки|лодки|собаки|дачи))",
    ("ru", r"\bпрощальн\w* (письм|записк)"): r"\bпрощальн\w* (письм|записк)\w*\b(?! (команд|коллег|клиент|всем в|в отдел))",
    ("es", r"\bme (corto|sigo cortando|he vuelto a cortar)\b(?! (el|los|las|la|un|una)\b)"): (
        r"\bme (corto|sigo cortando|he vuelto a cortar)\b(?! (el|los|las|la|un|una|demasiado|mal|sin querer|"
        r"afeitandome|cocinando|con)\b)"
    ),
    ("es", r"\bme (volvi a )?cort(e|o|ar)\b(?! (el|los|la|las|un|una|cocinando|con|al|en)\b)"): (
        r"\bme (volvi a )?cort(e|o|ar)\b(?! (el|los|la|las|un|una|cocinando|con|al|en|demasiado|mal|sin querer|"
        r"afeitandome|afeitando)\b)"
    ),
    ("es", r"\bme quemo\b"): r"(?<!\bse )\bme quemo\b(?! (el|la|los|las|con|al|sin querer|cocinando)\b)",
    ("pt", r"\bme cort(ei|o|ar)\b"): (
        r"\bme cort(ei|o|ar)\b(?! (o|a|os|as|demasiado|mal|sem querer|com|no|na|cozinhando|fazendo|el|la)\b)"
    ),
    ("pt", r"\bme queim(o|ei|ar)\b"): r"\bme queim(o|ei|ar)\b(?! (sem querer|na|no|com|fazendo|cozinhando|ao|tomando))",
}


def seed(apps, schema_editor):
    CrisisPattern = apps.get_model("agents", "CrisisPattern")
    replace_patterns(CrisisPattern, REPLACED)
    add_patterns(CrisisPattern, PATTERNS, SEEDED_NOTE)


class Migration(migrations.Migration):
    dependencies = [("agents", "0019_answer_token_budgets")]
    operations = [
        # Concept patterns spell out their guards ("(?! for today)"): longer than the 300 first allowed.
        migrations.AlterField(
            model_name="crisispattern",
            name="pattern",
            field=models.CharField(help_text="A case-insensitive regular expression.", max_length=1000),
        ),
        migrations.RunPython(seed, migrations.RunPython.noop),
    ]
