"""What a crisis signal sets off beyond the calm reply: the resources card in the coachee's
language and the alert to the coachee's coaches."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.cache import cache
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from agents.models import (
    CoachAssignment,
    CrisisCategory,
    CrisisResource,
    Escalation,
    ResourceKind,
    Turn,
)
from agents.safety import replies
from agents.turns import event_log

logger = logging.getLogger(__name__)


INTERNATIONAL = "intl"  # the resources shown where a locale has none: a directory, emergency advice


def crisis_resources_for(locale: str, category: str = CrisisCategory.SUICIDE) -> list[dict[str, str]]:
    """The operator-configured resources of a locale (its region, else its language), else the
    international directory. For abuse, the domestic-violence lines come first."""
    kinds = [ResourceKind.ABUSE, ResourceKind.CRISIS] if category == CrisisCategory.ABUSE else [ResourceKind.CRISIS]
    for candidate in dict.fromkeys([locale, locale.split("-")[0], INTERNATIONAL]):
        rows = list(
            CrisisResource.objects.filter(locale=candidate, active=True, kind__in=kinds)
            .order_by("kind", "order", "name")  # "abuse" sorts before "crisis"
            .values("name", "contact", "url", "description")
        )
        if rows:
            return [{key: str(value) for key, value in row.items()} for row in rows]
    return []


def safety_notice_emit(
    *, turn: Turn, level: str, category: str = CrisisCategory.SUICIDE, someone_else: bool = False
) -> None:
    """Show the crisis-resources card beside the reply (escalation refer or crisis), in the
    coachee's language, titled for a helper where the words tell someone else's crisis; on
    crisis, alert the coachee's coaches once the change is committed."""
    locale = turn.session.locale
    event_log.event_emit(
        session_id=turn.session_id,
        type="safety.notice",
        payload={
            "turn_id": turn.pk,
            "level": level,
            "category": category,
            "resources": crisis_resources_for(locale, category),
            "someone_else": someone_else,
            **replies.card_text(locale, level, someone_else=someone_else),
        },
    )
    if level == Escalation.CRISIS:
        turn_id = turn.pk
        # Stability's crisis flags the turn as the pre-gate's does (whose own reason stands).
        Turn.objects.filter(pk=turn_id, flagged=False).update(flagged=True, flag_reason="crisis (Stability)")
        # robust: a failing alert is logged, never raised into the request that stored the turn.
        transaction.on_commit(lambda: coach_alert_crisis(turn_id=turn_id), robust=True)


# Remembered this long, so a redelivered task or a second crisis signal on the same turn (the
# pre-gate, then Stability) sends no second alert. Far longer than any turn lives.
CRISIS_ALERT_TTL_S = 7 * 24 * 3600


def coach_alert_crisis(*, turn_id: int) -> int:
    """Email the coachee's assigned coaches that a turn needs them now; returns how many were told.

    Once per turn. The email names the session and turn and links to the turn's review page; it
    never carries message text (email leaves our systems; the review page is access-controlled).
    The turn itself is already in the admin review queue (escalated and flagged).
    """
    turn = Turn.objects.select_related("session").get(pk=turn_id)
    # The start time too: ids restart when a database is recreated, Redis keys do not.
    key = f"coaching:crisis-alert:{turn_id}:{turn.started_at.timestamp():.6f}"
    try:
        if not cache.add(key, 1, timeout=CRISIS_ALERT_TTL_S):
            return 0
    except Exception:
        # Without Redis the alert may go twice; that is better than not at all.
        logger.exception("crisis alert for turn %s: could not record it in the cache", turn_id)
    emails = list(
        CoachAssignment.objects.filter(coachee_id=turn.session.coachee_id, coach__is_active=True)
        .exclude(coach__email="")
        .order_by("coach_id")
        .values_list("coach__email", flat=True)
    )
    if not emails:
        logger.warning("crisis on turn %s: the coachee has no assigned coach with an email address", turn_id)
        return 0
    review = reverse("admin:agents_coachingsession_review", args=[turn.session_id])
    link = f"{settings.COACHING_SITE_URL}{review}?turn={turn_id}#turn-{turn_id}"
    subject = f"Crisis alert: session {turn.session_id}, turn {turn_id}"
    body = (
        f"A coachee you are assigned to may be in crisis (session {turn.session_id}, turn {turn_id}, "
        f"{timezone.localtime(turn.started_at):%Y-%m-%d %H:%M %Z}).\n\n"
        "They were shown the crisis resources for their locale. Please review the turn now:\n"
        f"{link}\n\n"
        "This email deliberately contains no message text; read it on the review page."
    )
    try:
        # One email per coach: coaches must not see each other's addresses.
        for email in emails:
            send_mail(subject, body, None, [email])
    except Exception:
        logger.exception("crisis alert for turn %s could not be sent", turn_id)
        cache.delete(key)  # let a later crisis signal on this turn try again
        return 0
    logger.warning("crisis on turn %s: %d coach(es) alerted", turn_id, len(emails))
    return len(emails)
