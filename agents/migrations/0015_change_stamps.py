"""Change stamps (models.ChangeStamp) and the triggers that renew them.

Triggers rather than Django signals: queryset.update(), bulk and cascade deletes and raw SQL
all change rows without a signal, and a copy kept on a stale stamp would put old (or erased)
data in front of a model.
"""

from django.db import migrations, models

BUMP = """
-- Versions come from one sequence, not a counter per key: a version is never given twice,
-- even after the table is emptied (TRUNCATE, flush), so a copy kept on an old one never
-- matches new data by chance.
CREATE SEQUENCE agents_changestamp_version;

CREATE FUNCTION agents_stamp_bump(stamp_key text) RETURNS void AS $$
    INSERT INTO agents_changestamp (key, version) VALUES (stamp_key, nextval('agents_changestamp_version'))
    ON CONFLICT (key) DO UPDATE SET version = EXCLUDED.version;
$$ LANGUAGE sql;

-- Rows with a coachee_id column (sessions, predictions, blackboard versions).
CREATE FUNCTION agents_stamp_coachee() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN PERFORM agents_stamp_bump('coachee:' || OLD.coachee_id); END IF;
    IF TG_OP <> 'DELETE' THEN PERFORM agents_stamp_bump('coachee:' || NEW.coachee_id); END IF;
    RETURN NULL;
END $$ LANGUAGE plpgsql;

-- Rows of a session (messages, summaries). A row whose session is gone with it (a cascade)
-- is stamped by the session's own delete.
CREATE FUNCTION agents_stamp_session_coachee() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM agents_stamp_bump('coachee:' || s.coachee_id) FROM agents_coachingsession s WHERE s.id = OLD.session_id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM agents_stamp_bump('coachee:' || s.coachee_id) FROM agents_coachingsession s WHERE s.id = NEW.session_id;
    END IF;
    RETURN NULL;
END $$ LANGUAGE plpgsql;

-- Agent runs (Stability's only: its blocked moves carry over to the next turn).
CREATE FUNCTION agents_stamp_run_coachee() RETURNS trigger AS $$
DECLARE run_turn bigint;
BEGIN
    IF TG_OP = 'DELETE' THEN run_turn := OLD.turn_id; ELSE run_turn := NEW.turn_id; END IF;
    PERFORM agents_stamp_bump('coachee:' || s.coachee_id)
        FROM agents_turn t JOIN agents_coachingsession s ON s.id = t.session_id WHERE t.id = run_turn;
    RETURN NULL;
END $$ LANGUAGE plpgsql;

CREATE FUNCTION agents_stamp_setup() RETURNS trigger AS $$
BEGIN
    PERFORM agents_stamp_bump('setup');
    RETURN NULL;
END $$ LANGUAGE plpgsql;
"""

SETUP_TABLES = [
    "agents_agentconfig",
    "agents_modelendpoint",
    "agents_promptversion",
    "agents_coachingmove",
    "agents_crisispattern",
]


def coachee_trigger(name: str, table: str, function: str, events: str, when: str = "") -> str:
    return (
        f"CREATE CONSTRAINT TRIGGER {name} AFTER {events} ON {table} DEFERRABLE INITIALLY DEFERRED "
        f"FOR EACH ROW {f'WHEN ({when})' if when else ''} EXECUTE FUNCTION {function}();"
    )


ANY_CHANGE = "INSERT OR UPDATE OR DELETE"
COACHEE_TRIGGERS = [
    coachee_trigger("agents_coachingsession_stamp", "agents_coachingsession", "agents_stamp_coachee", ANY_CHANGE),
    coachee_trigger("agents_prediction_stamp", "agents_prediction", "agents_stamp_coachee", ANY_CHANGE),
    coachee_trigger("agents_blackboardversion_stamp", "agents_blackboardversion", "agents_stamp_coachee", ANY_CHANGE),
    coachee_trigger("agents_message_stamp", "agents_message", "agents_stamp_session_coachee", ANY_CHANGE),
    coachee_trigger("agents_sessionsummary_stamp", "agents_sessionsummary", "agents_stamp_session_coachee", ANY_CHANGE),
    coachee_trigger(
        "agents_agentrun_stamp", "agents_agentrun", "agents_stamp_run_coachee", "INSERT OR UPDATE", "NEW.agent = 'stability'"
    ),
    coachee_trigger(
        "agents_agentrun_stamp_delete", "agents_agentrun", "agents_stamp_run_coachee", "DELETE", "OLD.agent = 'stability'"
    ),
]
TRIGGERED_TABLES = {
    "agents_coachingsession_stamp": "agents_coachingsession",
    "agents_prediction_stamp": "agents_prediction",
    "agents_blackboardversion_stamp": "agents_blackboardversion",
    "agents_message_stamp": "agents_message",
    "agents_sessionsummary_stamp": "agents_sessionsummary",
    "agents_agentrun_stamp": "agents_agentrun",
    "agents_agentrun_stamp_delete": "agents_agentrun",
    **{f"{t}_stamp": t for t in SETUP_TABLES},
}

FORWARD = "\n".join(
    [
        BUMP,
        *COACHEE_TRIGGERS,
        # Setup changes come from operators' forms, never from a turn: stamped at once, in the
        # statement, so the writing transaction itself (a test's, an admin action's) sees it.
        *(
            f"CREATE TRIGGER {t}_stamp AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {t} "
            "FOR EACH STATEMENT EXECUTE FUNCTION agents_stamp_setup();"
            for t in SETUP_TABLES
        ),
    ]
)
REVERSE = "\n".join(
    [
        *(f"DROP TRIGGER IF EXISTS {name} ON {table};" for name, table in TRIGGERED_TABLES.items()),
        "DROP FUNCTION IF EXISTS agents_stamp_setup, agents_stamp_run_coachee, agents_stamp_session_coachee,"
        " agents_stamp_coachee, agents_stamp_bump;",
        "DROP SEQUENCE IF EXISTS agents_changestamp_version;",
    ]
)


class Migration(migrations.Migration):
    dependencies = [("agents", "0014_crisis_patterns_batch_2")]

    operations = [
        migrations.CreateModel(
            name="ChangeStamp",
            fields=[
                ("key", models.CharField(max_length=40, primary_key=True, serialize=False)),
                ("version", models.BigIntegerField(default=0)),
            ],
        ),
        migrations.RunSQL(FORWARD, REVERSE),
    ]
