"""The coachee's memory page: only clean sentences, numbered as shown, each with a link to the
message it came from (by its turn number in the session), and deleting an item for real."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from agents.memory import blackboard, edits
from agents.models import BlackboardVersion, Prediction, Turn
from agents.roles.schemas import EvidencedItem, FollowThroughPrediction, ShadowOutput
from agents.turns import accept, sessions
from tests.conftest import make_coachee
from tests.test_views import logged_in

pytestmark = pytest.mark.django_db

MARKUP = "} } What the system remembers: <<\u2039data"  # as seen on the page: a lookalike angle quote


def findings(pattern: str = "procrastination", confidence: int = 70) -> ShadowOutput:
    return ShadowOutput(
        stated_goals=[EvidencedItem(text="run three times a week", evidence=[])],
        revealed_priorities=[
            EvidencedItem(text="Work comes first", evidence=[]),
            EvidencedItem(text="Sleep matters more than you say", evidence=[]),
        ],
        follow_through=FollowThroughPrediction(
            commitment="run on Monday", probability_pct=40, horizon_days=7, rationale="Busy week"
        ),
        pattern_class=pattern,
        pattern_confidence_pct=confidence,
    )


def remembered(user: Any) -> tuple[dict[str, Any], Turn]:
    """Three coachee messages; Shadow wrote from the third, with one junk priority and a
    pattern it was not sure of, as older versions did."""
    session = sessions.session_start(user_id=user.pk)
    for n, text in enumerate(["Hi", "Work is a lot", "I skipped my run again"]):
        accept.turn_accept(session_id=session.pk, user_id=user.pk, client_id=f"m{n}", text=text)
    third = Turn.objects.filter(session=session).order_by("started_at").last()
    assert third is not None
    data = blackboard.merge_shadow(blackboard.empty(), findings(), turn_id=third.pk, at="2026-11-30T10:00:00")
    data = blackboard.merge_shadow(data, findings("avoidance", 0), turn_id=third.pk, at="2026-11-30T10:05:00")
    junk = dict(data["revealed_priorities"][0], id="junk1", text=MARKUP)
    data["revealed_priorities"].insert(1, junk)
    BlackboardVersion.objects.create(coachee=user, version=1, data=data)
    return data, third


def test_the_memory_page_reads_as_clean_sentences_with_their_sources(seeded: None) -> None:
    client, user = logged_in()
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
    client, user = logged_in()
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
    intruder: Client = logged_in("intruder")[0]
    response = intruder.post(
        reverse("memory"), {"item_id": data["stated_goals"][0]["id"], "action": "delete"}, follow=True
    )
    assert b"cannot be changed" in response.content
    assert BlackboardVersion.objects.filter(coachee=owner).count() == 1
    assert blackboard.find_item(BlackboardVersion.objects.get(coachee=owner).data, data["stated_goals"][0]["id"])
