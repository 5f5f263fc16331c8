"""The coachee's memory page: only clean sentences, numbered as shown, each with a link to the
message it came from (by its turn number in the session), and deleting an item for real."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from agents.memory import blackboard, edits
from agents.models import BlackboardVersion, Prediction
from tests.support.people import coachee_client, make_coachee
from tests.support.turns import MARKUP, remembered

pytestmark = pytest.mark.django_db


def test_the_memory_page_reads_as_clean_sentences_with_their_sources(seeded: None) -> None:
    client, user = coachee_client()
    _, third = remembered(user)
    html = client.get(reverse("memory")).content.decode()
    assert MARKUP not in html
    assert "&lt;&lt;" not in html
    assert "confident" not in html
    assert "0%" not in html
    assert "0 %" not in html.replace("40 %", "")
    assert "You tend to put things off until later." in html
    assert "steer around" not in html  # a 0 %-sure pattern says nothing
    assert "Run three times a week" in html  # a sentence starts with a capital
    assert "Run on Monday, within 7 days (the coach expected a 40 % chance)." in html
    # Priorities are one numbered list of what is shown: 1, 2 with nothing skipped.
    section = html[html.index("What your actions suggest matters to you") :]
    section = section[: section.index("</ol>")]
    assert section.count('<li class="memory-item') == 2
    # The source is the message, by its turn number in the session (not the database id).
    link = f"{reverse('chat-session', args=[third.session_id])}#msg-{third.user_message.seq}"
    assert f'<a href="{link}">your message in turn 3 of the session of' in html
    chat = client.get(reverse("chat-session", args=[third.session_id])).content.decode()
    assert re.search(rf'<li class="msg msg-user" id="msg-{third.user_message.seq}"', chat)


def test_deleting_an_item_removes_it_everywhere_for_good(seeded: None) -> None:
    client, user = coachee_client()
    data, third = remembered(user)
    Prediction.objects.create(
        coachee=user,
        turn=third,
        commitment="run on Monday",
        probability=0.4,
        horizon_days=7,
        made_at=third.started_at,
        due_at=third.started_at,
    )
    edits.blackboard_item_edit(coachee_id=user.pk, item_id=data["stated_goals"][0]["id"], hidden=True)
    goal, plan = data["stated_goals"][0]["id"], data["predictions"][-1]["id"]

    for item_id in (goal, plan):
        response = client.post(reverse("memory"), {"item_id": item_id, "action": "delete"}, follow=True)
        assert "Deleted, also from the coach" in response.content.decode()

    versions = list(BlackboardVersion.objects.filter(coachee=user).order_by("version"))
    assert [v.version for v in versions] == [1, 2, 3, 4]
    assert versions[-1].edited_by_id == user.pk
    for version in versions:  # history included: no revert can bring them back
        assert blackboard.find_item(version.data, goal) is None
        assert blackboard.find_item(version.data, plan) is None
        assert "run three times a week" not in str(version.data)
    assert not Prediction.objects.filter(coachee=user).exists()
    assert "Work comes first" in str(versions[-1].data)  # the rest stays


def test_nobody_deletes_another_coachees_memory(seeded: None) -> None:
    owner = make_coachee("owner")
    data, _ = remembered(owner)
    intruder: Client = coachee_client("intruder")[0]
    response = intruder.post(
        reverse("memory"), {"item_id": data["stated_goals"][0]["id"], "action": "delete"}, follow=True
    )
    assert b"cannot be changed" in response.content
    assert BlackboardVersion.objects.filter(coachee=owner).count() == 1
    assert blackboard.find_item(BlackboardVersion.objects.get(coachee=owner).data, data["stated_goals"][0]["id"])
