"""Coach's stream, on the event loop: the prepared request goes out first, the turn's canvas is
queued once it is out, and the reply is relayed to the session's group in small checked batches.

Checked tokens go out at most every COACHING_COACH_DELTA_BATCH_MS; the partial text is saved every
COACHING_COACH_SNAPSHOT_S so a client that reconnects mid-stream gets what exists so far, then
the rest live. Everything that reads or writes the database is in coach.py, called on a
database thread (db_call).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncGenerator, AsyncIterator

from channels.layers import get_channel_layer
from django.conf import settings

from agents.chat.coach import CoachCall, coach_end, coach_record_start, coach_snapshot
from agents.chat.db import db_call
from agents.llm.client import StreamState
from agents.llm.errors import LLMError
from agents.models import MessageStatus
from agents.safety import quality
from agents.turns import accept, event_log, finish

logger = logging.getLogger(__name__)


# Coach's stream is checked as it goes (quality.reply_findings, as for a reply cut off): the first
# words wait until there are enough to judge (a prompt echo is 6 words), and each later batch is
# relayed only once the whole text so far passes. A reply that fails is not relayed further, its
# request is closed (the engine stops generating it) and it is withdrawn when it ends: junk never
# reaches the screen, not even while it streams. A check of a 74-word reply costs ~1.5 ms on the
# event loop (measured on a 2-core Xeon); every 12 words it is ~10 checks a 100-word reply, and a
# GPU at ~120 tokens/s writes 12 words in about 0.1 s (estimated from the rate, not measured).
LIVE_CHECK_FIRST_WORDS = 8
LIVE_CHECK_EVERY_WORDS = 12


class LiveCheckFailed(Exception):
    """Coach's text so far failed the quality gate while streaming."""


# Coach's request goes out before the turn's other first writes (the reply's message and run,
# the canvas's publish). Started beside it on database threads, they took the interpreter from
# the event loop while it built and sent the request. They wait until the model server has
# answered the request's headers (or the stream ended without a request: refused, failed, no
# endpoint free before the deadline), and no longer than this (a server slow to connect or to
# answer holds nothing back).
REQUEST_OUT_WAIT_S = 0.1


async def request_out(call: CoachCall | None) -> None:
    """Return once the model server has Coach's request (coach_run), or REQUEST_OUT_WAIT_S has
    passed; at once when Coach does not run."""
    if call is None:
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(call.state.answered.wait(), REQUEST_OUT_WAIT_S)


async def pipeline_start(turn_id: int, call: CoachCall | None) -> None:
    """Queue the turn's canvas once Coach's request is out (request_out)."""
    await request_out(call)
    await db_call(accept.pipeline_start)(turn_id=turn_id)


async def coach_run(turn_id: int, call: CoachCall | None) -> None:
    """Send Coach's prepared request (coach_accept) and relay the reply to the session's group."""
    if call is None:
        await degraded_notice_if_open(turn_id)
        await db_call(accept.turn_canvas_after_coach)(turn_id=turn_id)
        return
    state, started = call.state, time.monotonic()
    stream = call.stream()
    # The request goes out first; the reply's message and run are written while the model
    # prepares its first token, which is then relayed at once.
    first_piece = asyncio.ensure_future(anext(stream))
    # A stream that ends before the server answered (refused, failed) has nothing to wait for.
    first_piece.add_done_callback(lambda _: state.answered.set())
    try:
        await request_out(call)
        await db_call(coach_record_start)(call=call)
    except BaseException as exc:
        first_piece.cancel()
        if not isinstance(exc, Exception):
            raise
        logger.exception("coach could not record its start on turn %s", turn_id)
        await db_call(accept.turn_canvas_after_coach)(turn_id=turn_id)
        return
    await degraded_notice_if_open(turn_id)  # after the request is out: it never delays Coach
    await coach_relay(call, state, pieces_from(first_piece, stream), started=started)


async def degraded_notice_if_open(turn_id: int) -> None:
    """An endpoint already failing fast: say so now, before the coachee waits for parts of the
    answer that cannot come."""
    try:
        await db_call(finish.degraded_notice_if_open)(turn_id=turn_id)
    except Exception:
        logger.exception("degraded-mode check failed on turn %s", turn_id)


async def pieces_from(first_piece: asyncio.Future[str], stream: AsyncIterator[str]) -> AsyncGenerator[str, None]:
    """The first piece (already asked for), then the rest; closing this closes the model's stream."""
    try:
        try:
            yield await first_piece
        except StopAsyncIteration:
            return
        async for piece in stream:
            yield piece
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


async def coach_relay(
    call: CoachCall, state: StreamState, pieces: AsyncGenerator[str, None], *, started: float
) -> None:
    """Relay the reply to the session's group in small checked batches, then record how it ended."""
    layer = get_channel_layer()
    group = event_log.session_group(call.session_id)
    batch_s = settings.COACHING_COACH_DELTA_BATCH_MS / 1000
    snapshot_s = settings.COACHING_COACH_SNAPSHOT_S
    text = ""
    sent = 0  # characters of `text` already relayed
    checked_words = 0  # of `text`, passed the gate (all of it relayed)
    last_snapshot = time.monotonic()
    # The batch window paces what is relayed, from the last relay: a piece that brings the words
    # the check waits for goes out at once when the window is over, not at the next tick. The
    # first relay has no window before it: it is what the coachee waits for.
    last_relay = -math.inf
    status = MessageStatus.COMPLETE
    error: LLMError | None = None

    async def relay_if_due(*, ended: bool = False) -> None:
        nonlocal sent, last_relay, checked_words
        if sent == len(text) or layer is None or call.hold:  # held: shown by coach.done once checked
            return
        if not ended and time.monotonic() - last_relay < batch_s:
            return
        words = len(text.split())
        due = LIVE_CHECK_FIRST_WORDS if sent == 0 else checked_words + LIVE_CHECK_EVERY_WORDS
        if words < due and not ended:
            return  # too few new words to judge yet
        findings = quality.reply_findings(text, call.expect, cut_off=True)
        if findings:
            call.live_findings = findings
            raise LiveCheckFailed(quality.summary(findings))
        checked_words = words
        event = {
            "type": "coach.delta",
            "turn_id": call.turn_id,
            "message_id": call.message_id,
            "offset": sent,
            "text": text[sent:],
        }
        sent = len(text)
        last_relay = time.monotonic()
        await layer.group_send(group, {"type": "coach.delta", "event": event})

    try:
        async for piece in pieces:
            text += piece
            await relay_if_due()
            now = time.monotonic()
            if now - last_snapshot >= snapshot_s and not call.hold:
                last_snapshot = now
                # What was relayed (checked): a tab that resumes shows this.
                await db_call(coach_snapshot)(message_id=call.message_id, text=text[:sent])
        await relay_if_due(ended=True)
    except LiveCheckFailed:
        logger.info(
            "coach's reply on turn %s stopped while streaming: %s", call.turn_id, quality.summary(call.live_findings)
        )
        await pieces.aclose()
    except asyncio.CancelledError:
        # Stopped by the coachee: the reply stays as they saw it (the words not yet checked
        # were never shown, and are dropped).
        status = MessageStatus.STOPPED
        if not call.hold:
            text = text[:sent]
        raise
    except LLMError as exc:
        # Failed, also after some text came: the coachee saw the start of a reply that the
        # model never finished (no fallback splices in another model's continuation). The
        # text so far stays, marked failed as the watchdog marks an interrupted stream
        # (turns.finish.coach_interrupted_close), and the error event offers Retry.
        status = MessageStatus.FAILED
        error = exc
        logger.warning("coach failed on turn %s: %s", call.turn_id, exc)
    finally:
        latency_ms = int((time.monotonic() - started) * 1000)
        # Shielded: a Stop (cancellation) must still leave a finished record behind.
        await asyncio.shield(
            db_call(coach_end)(call=call, text=text, status=status, state=state, latency_ms=latency_ms, error=error)
        )
