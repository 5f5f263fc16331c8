"""Drop the coachee change stamps and their triggers (migration 0015).

They told the read-ahead copy of a coachee's context sources (agents/context_ahead.py,
removed) whether it was still current, for milliseconds against the test simulator, where a
real engine spends seconds per agent; and each fired on every write of a
message, summary, session, prediction, blackboard version or Stability run. The "setup" stamp
and its triggers stay: each process keeps the agents' setup by it (agents/turn_cache.py).
"""

import importlib

from django.db import migrations

created = importlib.import_module("agents.migrations.0015_change_stamps")

SETUP_TRIGGERS = {f"{table}_stamp" for table in created.SETUP_TABLES}
COACHEE_TRIGGERS = {name: table for name, table in created.TRIGGERED_TABLES.items() if name not in SETUP_TRIGGERS}
# 0015's coachee trigger functions, as it wrote them: the reverse puts them back.
COACHEE_FUNCTIONS = created.BUMP[
    created.BUMP.index("-- Rows with a coachee_id column") : created.BUMP.index("CREATE FUNCTION agents_stamp_setup()")
]

FORWARD = "\n".join(
    [
        *(f"DROP TRIGGER IF EXISTS {name} ON {table};" for name, table in COACHEE_TRIGGERS.items()),
        "DROP FUNCTION IF EXISTS agents_stamp_run_coachee, agents_stamp_session_coachee, agents_stamp_coachee;",
        "DELETE FROM agents_changestamp WHERE key LIKE 'coachee:%';",
    ]
)
REVERSE = "\n".join([COACHEE_FUNCTIONS, *created.COACHEE_TRIGGERS])


class Migration(migrations.Migration):
    dependencies = [("agents", "0025_coach_inbox")]

    operations = [migrations.RunSQL(FORWARD, REVERSE)]
