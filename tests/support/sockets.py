"""The chat consumer driven in-process (channels' WebsocketCommunicator), no live stack."""

from __future__ import annotations

import asyncio
from typing import Any

from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from agents.chat.consumers import ChatConsumer
from agents.turns import sessions
from tests.support.people import make_coachee


def communicator(user: Any, session_id: int) -> WebsocketCommunicator:
    comm = WebsocketCommunicator(ChatConsumer.as_asgi(), f"/ws/sessions/{session_id}/")
    comm.scope["user"] = user
    comm.scope["url_route"] = {"kwargs": {"session_id": session_id}}
    return comm


async def owned_session(username: str = "coachee") -> tuple[Any, Any]:
    user = await sync_to_async(make_coachee)(username)
    session = await sync_to_async(sessions.session_start)(user_id=user.pk)
    return user, session


async def canvases_queued(started: list[int], count: int, timeout_s: float = 5.0) -> list[int]:
    """The turns whose canvas was queued (no_pipeline's list), once `count` of them are: the
    canvas goes out once Coach's request is out, after the message.accepted event."""
    for _ in range(int(timeout_s / 0.01)):
        if len(started) >= count:
            break
        await asyncio.sleep(0.01)
    return started
