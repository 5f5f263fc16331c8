"""A coachee exports or deletes everything; after deletion a canary string is nowhere in
PostgreSQL or Redis, and only an anonymous audit record remains."""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import Any

import pytest
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from agents import privacy
from agents.memory import blackboard
from agents.models import AccountDeletion, AgentRun, BlackboardVersion, CoachingSession, Message, Turn
from agents.turns import accept, dispatch, limits, sessions
from tests.support.people import make_coachee
from tests.support.turns import shadow_findings

pytestmark = pytest.mark.django_db(transaction=True)


def coachee_with_history(canary: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(dispatch, "turn_pipeline_start", lambda turn_id: None)
    user = make_coachee(f"canary-{uuid.uuid4().hex[:6]}")
    session = sessions.session_start(user_id=user.pk)
    accepted = accept.turn_accept(
        session_id=session.pk, user_id=user.pk, client_id="c1", text=f"My secret is {canary}, please keep it."
    )
    turn = Turn.objects.get(pk=accepted.turn_id)
    AgentRun.objects.create(turn=turn, agent="shadow", status="succeeded", raw_output=f"echo {canary}")
    data = blackboard.merge_shadow(blackboard.empty(), shadow_findings(), turn_id=turn.pk, at="2026-11-30T10:00:00")
    data["stated_goals"][0]["text"] = f"goal about {canary}"
    BlackboardVersion.objects.create(coachee=user, version=1, data=data, source_turn=turn)
    return user


def test_export_holds_everything_about_the_coachee(seeded_tx: None, monkeypatch: pytest.MonkeyPatch) -> None:
    canary = f"CANARY-{uuid.uuid4().hex}"
    user = coachee_with_history(canary, monkeypatch)
    client = Client()
    client.force_login(user)
    response = client.get(reverse("account-export"))
    assert response.status_code == 200
    assert "attachment" in response["Content-Disposition"]
    exported = json.loads(response.content)
    assert exported["account"]["username"] == user.username
    assert exported["account"]["locale"] == ""  # no language chosen: the browser's
    [session] = exported["sessions"]
    assert canary in session["messages"][0]["text"]
    assert session["turns"][0]["agents"][0]["agent"] == "shadow"
    assert canary in json.dumps(exported["memory"])


def test_deletion_removes_the_data_from_postgresql_and_redis(seeded_tx: None, monkeypatch: pytest.MonkeyPatch) -> None:
    canary = f"CANARY-{uuid.uuid4().hex}"
    user = coachee_with_history(canary, monkeypatch)
    user.set_password("delete-me-pass-1")
    user.save()
    assert limits.socket_open_allowed(user_id=user.pk, socket_id="tab-1")  # leaves a per-user key in Redis
    client = Client()
    client.force_login(user)

    refused = client.post(reverse("account"), {"password": "wrong"})
    assert refused.status_code == 200
    assert get_user_model().objects.filter(pk=user.pk).exists()

    response = client.post(reverse("account"), {"password": "delete-me-pass-1"})
    assert response.status_code == 302
    assert not get_user_model().objects.filter(pk=user.pk).exists()
    assert not CoachingSession.objects.exists()
    assert not Message.objects.exists()
    assert not BlackboardVersion.objects.exists()

    record = AccountDeletion.objects.get()
    assert record.subject == privacy.subject_hash(user.pk)
    assert record.counts["Message"] >= 1
    assert user.username not in json.dumps(record.counts)

    db = settings.DATABASES["default"]
    dump = subprocess.run(
        ["pg_dump", "--data-only", "-h", str(db["HOST"] or "localhost"), "-U", str(db["USER"]), str(db["NAME"])],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert len(dump) > 1000  # the dump really holds the database (seeded config, prompts...)
    assert canary not in dump
    assert user.username not in dump

    for offset in range(4):
        store = redis.Redis.from_url(f"{settings.REDIS_URL}/{settings.REDIS_DB_BASE + offset}")
        for key in store.scan_iter(count=500):
            assert not key.endswith(f"coaching:sockets:{user.pk}".encode()), key
            assert f"coaching:turns:{user.pk}:".encode() not in key, key
            kind = store.type(key)
            if kind == b"string":
                value: bytes = store.get(key) or b""  # type: ignore[assignment]  # redis-py types the sync client as async too
                assert canary.encode() not in value, key


def test_old_raw_outputs_and_prompts_are_pruned(seeded_tx: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import timedelta

    from django.utils import timezone

    canary = f"CANARY-{uuid.uuid4().hex}"
    user = coachee_with_history(canary, monkeypatch)
    turn = Turn.objects.get(session__coachee=user)
    Turn.objects.filter(pk=turn.pk).update(shared_prompt=f"history with {canary}")
    AgentRun.objects.filter(turn=turn).update(prompt_values={"reply": canary}, parsed_output={"kept": True})
    assert privacy.raw_outputs_prune(older_than_days=30) == 0  # too recent
    Turn.objects.filter(pk=turn.pk).update(started_at=timezone.now() - timedelta(days=31))
    assert privacy.raw_outputs_prune(older_than_days=30) == 1
    run = AgentRun.objects.get(turn=turn)
    assert run.raw_output == ""
    assert run.prompt_values == {}
    assert run.parsed_output == {"kept": True}
    assert Turn.objects.get(pk=turn.pk).shared_prompt == ""
