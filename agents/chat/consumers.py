"""The chat socket: validate frames, call services, relay the session group's events.

Thin by design: every decision lives in the turns package or coach.py.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
import unicodedata
from typing import Any

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.core.exceptions import PermissionDenied
from pydantic import TypeAdapter, ValidationError

from agents.chat.coach import coach_accept
from agents.chat.coach_stream import coach_run, pipeline_start
from agents.chat.db import db_call
from agents.observability import metrics
from agents.roles.schemas import UNSTORABLE_TEXT, InboundFrame, PingFrame, ResumeFrame, StopFrame, UserMessageFrame
from agents.turns import accept, event_log, finish, limits, progress, sessions

logger = logging.getLogger(__name__)

FRAME_ADAPTER: TypeAdapter[UserMessageFrame | ResumeFrame | StopFrame | PingFrame] = TypeAdapter(InboundFrame)
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_TOO_MANY_SOCKETS = 4429
# Background work started by a socket but not owned by it: a Coach reply keeps streaming
# (and is saved) when the socket that asked for it drops. Held here so it is not collected.
_BACKGROUND: set[asyncio.Task[None]] = set()
# Coach streams by turn id, so a Stop from any tab of the session can cancel them.
_COACH_TASKS: dict[int, asyncio.Task[None]] = {}


def _spawn(coro: Any) -> asyncio.Task[None]:
    task: asyncio.Task[None] = asyncio.create_task(coro)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)
    return task


async def _expire_after_deadline(turn_id: int, deadline: float) -> None:
    """The ASGI side of the watchdog: it still fires when no Celery worker is alive."""
    await asyncio.sleep(max(0.0, deadline - time.time()) + 1.5)
    await db_call(finish.turn_expire)(turn_id=turn_id)


class ChatConsumer(AsyncWebsocketConsumer):
    session_id: int
    user_id: int
    _lease: asyncio.Task[None] | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        # Whatever ends this socket (a clean close, a crashed handler, a cancelled instance),
        # its lease is given back; a killed process's lease runs out within SOCKET_LEASE_S.
        try:
            await super().__call__(scope, receive, send)
        finally:
            await asyncio.shield(self._release())

    async def dispatch(self, message: dict[str, Any]) -> None:
        # channels' own dispatch first closes the ORM's old connections on its one thread for
        # sync code: a hop there and back (waiting for the interpreter on a busy process) before
        # every frame and every relayed event, Coach's words included. This consumer never uses
        # the ORM on that thread: its database calls run on db_call's threads, which close their
        # own connections before and after each call.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def _release(self) -> None:
        lease, self._lease = self._lease, None
        if lease is None:
            return
        lease.cancel()
        await asyncio.to_thread(limits.socket_closed, user_id=self.user_id, socket_id=self.channel_name)

    async def _renew_lease(self) -> None:
        while True:
            await asyncio.sleep(limits.SOCKET_LEASE_RENEW_S)
            try:
                await asyncio.to_thread(limits.socket_lease_renew, user_id=self.user_id, socket_id=self.channel_name)
            except Exception:  # Redis away for a moment: the next renewal tries again
                logger.warning("could not renew the socket lease of user %s", self.user_id, exc_info=True)

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.refuse(CLOSE_UNAUTHENTICATED)
            return
        session_id = int(self.scope["url_route"]["kwargs"]["session_id"])
        try:
            await db_call(sessions.session_for_user)(session_id=session_id, user_id=user.pk)
        except PermissionDenied:
            await self.refuse(CLOSE_FORBIDDEN)
            return
        if not await asyncio.to_thread(limits.socket_open_allowed, user_id=user.pk, socket_id=self.channel_name):
            await self.refuse(CLOSE_TOO_MANY_SOCKETS)
            return
        self.user_id = user.pk
        self._lease = asyncio.create_task(self._renew_lease())
        self.session_id = session_id
        await self.channel_layer.group_add(event_log.session_group(self.session_id), self.channel_name)
        await self.channel_layer.group_add(event_log.user_group(self.user_id), self.channel_name)
        await self.accept()
        metrics.ws_connected()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "session_id"):
            metrics.ws_disconnected()
            await self._release()
            await self.channel_layer.group_discard(event_log.session_group(self.session_id), self.channel_name)
            await self.channel_layer.group_discard(event_log.user_group(self.user_id), self.channel_name)

    async def refuse(self, code: int) -> None:
        # Accept, then close with the reason: a close before accept() is an HTTP 403 to the
        # browser, which then only sees 1006 and cannot tell "log in again" from "not yours".
        # Nothing is sent and no group is joined before the close.
        metrics.ws_refused(code)
        await self.accept()
        await self.close(code=code)

    async def send_event(self, event: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps(event))

    async def send_error(self, code: str, detail: str, **about: Any) -> None:
        metrics.ws_frame_refused(code)
        await self.send_event({"type": "error", "code": code, "detail": detail, **about})

    # --- Client frames ----------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            await self.on_frame(text_data, bytes_data)
        except Exception:
            # A bug or a refused write must not kill the socket (and with it the coachee's
            # conversation view): say so, log it, and keep serving the next frame.
            logger.exception("a frame of session %s failed", getattr(self, "session_id", None))
            await self.send_error("server_error", "Something went wrong on our side; please try again.")

    async def on_frame(self, text_data: str | None, bytes_data: bytes | None) -> None:
        if text_data is None:
            await self.send_error("binary_not_supported", "Frames must be JSON text.")
            return
        if len(text_data.encode("utf-8", "surrogatepass")) > settings.COACHING_MAX_FRAME_BYTES:
            await self.send_error(
                "frame_too_large", f"Frames are limited to {settings.COACHING_MAX_FRAME_BYTES} bytes."
            )
            return
        try:
            frame = FRAME_ADAPTER.validate_python(json.loads(text_data))
        except (ValueError, RecursionError) as exc:
            if _unstorable(exc):
                await self.send_error("unstorable_text", _describe(exc))
            else:
                await self.send_error("invalid_frame", _describe(exc))
            return
        if isinstance(frame, UserMessageFrame):
            await self.on_user_message(frame)
        elif isinstance(frame, ResumeFrame):
            await self.on_resume(frame)
        elif isinstance(frame, StopFrame):
            await self.on_stop()
        elif isinstance(frame, PingFrame):
            await self.send_event({"type": "pong"})

    async def on_user_message(self, frame: UserMessageFrame) -> None:
        text = frame.text.strip()
        if is_blank(text):
            await self.send_error("empty_message", "The message is empty.")
            return
        if len(text) > settings.COACHING_MAX_MESSAGE_CHARS:
            # Refused whole, never cut: the coachee shortens it and sends it again.
            await self.send_error(
                "message_too_long",
                f"Your message is {len(text):,} characters long; messages are limited to "
                f"{settings.COACHING_MAX_MESSAGE_CHARS:,}. Nothing was sent: shorten it and send it again.",
                client_id=frame.client_id,
            )
            return
        await self.accept_and_run(frame.client_id, text)

    async def accept_and_run(self, client_id: str, text: str) -> None:
        """Store the message, queue the turn's canvas and start Coach."""
        try:
            accepted = await db_call(coach_accept)(
                session_id=self.session_id, user_id=self.user_id, client_id=client_id, text=text
            )
        except PermissionDenied:
            await self.close(code=CLOSE_FORBIDDEN)
            return
        except accept.SessionClosedError:
            await self.send_error("session_closed", "This session has ended; start a new one to continue.")
            return
        except accept.TurnRunningError as busy:
            # The page queues the message and sends it again when this turn is done.
            await self.send_error(
                "turn_running",
                "A reply is still coming. Your message was not sent yet; it goes out when the reply is finished.",
                turn_id=busy.turn_id,
                client_id=client_id,
            )
            return
        result = accepted.result
        if result is None:
            await self.send_error(
                "rate_limited", f"You can send {settings.COACHING_TURNS_PER_MINUTE} messages a minute; wait a moment."
            )
            return
        if not result.created:
            # A re-sent message: acknowledge it again, run nothing twice.
            await self.send_event(result.event)
            return
        turn_id = result.turn_id
        task = _spawn(coach_run(turn_id, accepted.call))
        _COACH_TASKS[turn_id] = task
        task.add_done_callback(functools.partial(_forget_coach, turn_id))
        if result.pipeline_due:
            # After Coach's request, not before it: the canvas's broker publishes (a few ms
            # under load) then overlap the model's first token instead of delaying it.
            _spawn(pipeline_start(turn_id, accepted.call))
        _spawn(_expire_after_deadline(turn_id, time.time() + settings.COACHING_TURN_DEADLINE_S))

    async def on_resume(self, frame: ResumeFrame) -> None:
        after_seq = frame.after_seq
        replayed = 0
        while True:
            events = await db_call(event_log.events_after)(session_id=self.session_id, after_seq=after_seq)
            replayed += len(events)
            for event in events:
                await self.send_event(event)
            if len(events) < event_log.REPLAY_PAGE:
                break
            after_seq = events[-1]["seq"]
        metrics.ws_resumed(events=replayed)
        for status in await db_call(progress.agent_statuses)(session_id=self.session_id):
            await self.send_event(status)
        streaming = await db_call(finish.streaming_coach_messages)(session_id=self.session_id)
        for message in streaming:
            await self.send_event(
                {
                    "type": "coach.snapshot",
                    "turn_id": message.turn_as_coach.pk,
                    "message_id": message.pk,
                    "text": message.text,
                }
            )

    async def on_stop(self) -> None:
        turn_ids = await db_call(finish.running_turn_ids)(session_id=self.session_id)
        for turn_id in turn_ids:
            await db_call(finish.turn_stop)(turn_id=turn_id, user_id=self.user_id)
            _cancel_coach(turn_id)

    # --- Session group events (type "coach.delta" → method coach_delta) --------------

    async def relay(self, message: dict[str, Any]) -> None:
        await self.send_event(message["event"])

    message_accepted = coach_started = coach_delta = coach_done = agent_status = synth_done = error = relay
    safety_notice = session_ended = service_degraded = relay

    async def connection_close(self, message: dict[str, Any]) -> None:
        await self.close(code=message["code"])

    async def turn_done(self, message: dict[str, Any]) -> None:
        if message["event"].get("status") == "stopped":
            _cancel_coach(message["event"]["turn_id"])
        await self.relay(message)


def _forget_coach(turn_id: int, _task: asyncio.Task[None]) -> None:
    _COACH_TASKS.pop(turn_id, None)


def _cancel_coach(turn_id: int) -> None:
    task = _COACH_TASKS.get(turn_id)
    if task is not None and not task.done():
        task.cancel()


def is_blank(text: str) -> bool:
    """No visible character: only separators and control or format characters (zero-width
    spaces, byte-order marks, direction marks) count as empty too."""
    return all(unicodedata.category(ch)[0] in "ZC" for ch in text)


# Pydantic's own refusal of a string with a lone surrogate, and ours of NUL (agents/text.py).
UNSTORABLE_ERRORS = {UNSTORABLE_TEXT, "string_unicode"}


def _unstorable(exc: Exception) -> bool:
    return isinstance(exc, ValidationError) and any(e["type"] in UNSTORABLE_ERRORS for e in exc.errors())


def _describe(exc: Exception) -> str:
    if _unstorable(exc):
        return "The message contains characters that cannot be stored: NUL (U+0000) or an unpaired surrogate."
    if isinstance(exc, ValidationError):
        first = exc.errors(include_input=False, include_url=False)[:3]
        return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in first)
    if isinstance(exc, RecursionError):
        return "The frame is nested too deeply."
    return "The frame is not valid JSON."
