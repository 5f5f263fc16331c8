"""What no reply may contain: the critic gate's deterministic half, and one of the quality gate's
checks on every text a coachee sees (quality.reply_findings). No model involved."""

import re

from agents.safety.reading import variants

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
