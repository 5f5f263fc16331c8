"""Drop the last change stamp ("setup") with its triggers, functions, sequence and table
(migration 0015). It let each process keep the agents' setup across turns; each turn now reads
its setup once per process (six small queries), and nothing is kept by a version number.
"""

import importlib

from django.db import migrations

created = importlib.import_module("agents.migrations.0015_change_stamps")
# 0015's setup tables, and the one 0022 stamped the same way.
SETUP_TABLES = [*created.SETUP_TABLES, "agents_agentfallback"]

FORWARD = "\n".join(
    [
        *(f"DROP TRIGGER IF EXISTS {table}_stamp ON {table};" for table in SETUP_TABLES),
        "DROP FUNCTION IF EXISTS agents_stamp_setup, agents_stamp_bump;",
        "DROP SEQUENCE IF EXISTS agents_changestamp_version;",
    ]
)
# 0015's sequence, its bump function and the setup trigger function, as it wrote them.
SETUP_FUNCTIONS = (
    created.BUMP[: created.BUMP.index("-- Rows with a coachee_id column")]
    + created.BUMP[created.BUMP.index("CREATE FUNCTION agents_stamp_setup()") :]
)
REVERSE = "\n".join(
    [
        SETUP_FUNCTIONS,
        *(
            f"CREATE TRIGGER {table}_stamp AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION agents_stamp_setup();"
            for table in SETUP_TABLES
        ),
    ]
)


class Migration(migrations.Migration):
    dependencies = [("agents", "0026_drop_coachee_stamps")]

    # Reversed in the other order: the table first, then what writes to it.
    operations = [
        migrations.RunSQL(FORWARD, REVERSE),
        migrations.DeleteModel(name="ChangeStamp"),
    ]
