"""Crisis lexicon: "покончить" narrowed in four Russian patterns where it means quitting a habit.

"Покончить с собой" is suicide and "покончить со всем" ending it all, but "хочу покончить с
курением" (quit smoking), "...с подписками", "способы покончить с прокрастинацией" are what a
coaching chat is for, and each brought the crisis card (the development sessions showed the
second: "хочу наконец покончить с подписками на три стриминга"). The verb still counts alone
("решил покончить", "способ покончить") and before собой, (этой, своей) жизнью, всем, этим;
not before "с" or "со" and another word. Same rule as every seed: a row an operator changed is kept.
"""

from django.db import migrations

from agents.migrations._crisis_lexicon import replace_patterns

# "покончить", unless "с"/"со" and a word follow that are not the ones that end a life
# ("собой", "жизнью" or "этой/своей жизнью", "всем", "этим").
_ENDING = r"покончить(?! (с|со) (?!(собой|всем|этим|(\w+ )?жизнью)\b)\w+)"

REPLACED = {
    ("ru", r"\bспособ\w* (уйти из жизни|умереть|покончить)\b"): (
        r"\bспособ\w* (уйти из жизни|умереть|" + _ENDING + r")\b"
    ),
    (
        "ru",
        r"\b(хочу|хочется|хотел\w*|хотелось бы|мечтаю|решил\w*|собираюсь|готов\w*|планирую)\b"
        r"( (?!(не|чтобы|он|она|они|телефон)\b)\w+){0,3} (умереть(?! (от|со|с|за) )|сдохнуть|не жить|"
        r"не существовать|исчезнуть навсегда|уйти навсегда|покончить|уснуть навсегда|заснуть навсегда|"
        r"не проснуться|свести сч[её]ты|наложить на себя руки|закончить (вс[её]|жизнь|с жизнью)|"
        r"уйти из жизни|убить себя)",
    ): (
        r"\b(хочу|хочется|хотел\w*|хотелось бы|мечтаю|решил\w*|собираюсь|готов\w*|планирую)\b"
        r"( (?!(не|чтобы|он|она|они|телефон)\b)\w+){0,3} (умереть(?! (от|со|с|за) )|сдохнуть|не жить|"
        r"не существовать|исчезнуть навсегда|уйти навсегда|" + _ENDING + r"|уснуть навсегда|заснуть навсегда|"
        r"не проснуться|свести сч[её]ты|наложить на себя руки|закончить (вс[её]|жизнь|с жизнью)|"
        r"уйти из жизни|убить себя)"
    ),
    (
        "ru",
        r"\b(думаю|подумываю|задумываюсь) (о том|о том чтобы) (умереть|уйти из жизни|покончить|не жить|"
        r"свести сч[её]ты)",
    ): (
        r"\b(думаю|подумываю|задумываюсь) (о том|о том чтобы) (умереть|уйти из жизни|" + _ENDING + r"|не жить|"
        r"свести сч[её]ты)"
    ),
    ("ru", r"\bспособ\w*\b.{0,10}\b(умереть|уйти из жизни|покончить|свести сч[её]ты)"): (
        r"\bспособ\w*\b.{0,10}\b(умереть|уйти из жизни|" + _ENDING + r"|свести сч[её]ты)"
    ),
}


def narrow(apps, schema_editor):
    replace_patterns(apps.get_model("agents", "CrisisPattern"), REPLACED)


class Migration(migrations.Migration):
    dependencies = [("agents", "0029_crisis_patterns_german_clause_end")]
    operations = [migrations.RunPython(narrow, migrations.RunPython.noop)]
