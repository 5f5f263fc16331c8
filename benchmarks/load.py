"""Coachees over real WebSockets (the `websockets` package), all on one asyncio loop.

Each coachee sends a message, waits for its `turn.done`, waits until its next send time and
repeats. Every frame received is logged with its wall-clock receive time; nothing is
computed here (metrics.py does that after the run).
"""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

# What coachees write; varied so the prompts are not all the same.
MESSAGES = (
    "I keep planning to run in the mornings and then I hit snooze every single day.",
    "Work is piling up and I said yes to two more projects this week. I feel stretched thin.",
    "I want to write every evening, but I end up scrolling on my phone instead.",
    "My manager wants the report by Friday and I have not started it yet.",
    "I made it to the gym twice this week and I would like to make it three times next week.",
    "I told myself I would call my sister this weekend and I keep putting it off.",
)


@dataclass(frozen=True)
class Coachee:
    index: int
    session_id: int
    cookie: str  # "sessionid=..." for the socket's Cookie header


@dataclass
class SentTurn:
    coachee: int
    index: int
    client_id: str
    sent_at: float  # wall clock, just before the frame was written
    turn_id: int | None = None
    lost: bool = False  # no turn.done within the wait


@dataclass
class CoacheeSocket:
    """One coachee's chat socket; `log` holds (receive time, event) for every frame."""

    http_root: str
    coachee: Coachee
    log: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    closed_error: str | None = None
    _ws: ClientConnection | None = None
    _reader: asyncio.Task[None] | None = None
    _turn_of_client: dict[str, int] = field(default_factory=dict)
    _accepted: dict[str, asyncio.Event] = field(default_factory=dict)
    _done: dict[int, asyncio.Event] = field(default_factory=dict)
    _coach_done: dict[int, asyncio.Event] = field(default_factory=dict)

    async def open(self) -> None:
        url = self.http_root.replace("http://", "ws://", 1) + f"/ws/sessions/{self.coachee.session_id}/"
        # No protocol pings: browsers send none, and a late pong under load would close the socket.
        self._ws = await connect(
            url,
            origin=Origin(self.http_root),
            additional_headers={"Cookie": self.coachee.cookie},
            ping_interval=None,
            open_timeout=30,
        )
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self._ws is not None
        try:
            async for raw in self._ws:
                at = time.time()
                event: dict[str, Any] = json.loads(raw)
                self.log.append((at, event))
                kind = event.get("type")
                if kind == "message.accepted" and event.get("client_id"):
                    self._turn_of_client[event["client_id"]] = int(event["turn_id"])
                    self._event(self._accepted, event["client_id"]).set()
                elif kind == "turn.done":
                    self._event(self._done, int(event["turn_id"])).set()
                elif kind == "coach.done":
                    self._event(self._coach_done, int(event["turn_id"])).set()
        except ConnectionClosed as exc:
            self.closed_error = f"closed: {exc}"

    @staticmethod
    def _event(events: dict[Any, asyncio.Event], key: Any) -> asyncio.Event:
        return events.setdefault(key, asyncio.Event())

    async def send_message(self, client_id: str, text: str) -> float:
        assert self._ws is not None
        frame = json.dumps({"type": "user.message", "client_id": client_id, "text": text})
        sent_at = time.time()
        await self._ws.send(frame)
        return sent_at

    async def wait_turn(self, client_id: str, timeout_s: float) -> int | None:
        """The turn id once its turn.done arrived; None when it did not within the timeout."""
        deadline = time.monotonic() + timeout_s
        try:
            await asyncio.wait_for(self._event(self._accepted, client_id).wait(), timeout_s)
            turn_id = self._turn_of_client[client_id]
            await asyncio.wait_for(self._event(self._done, turn_id).wait(), max(deadline - time.monotonic(), 0.01))
        except TimeoutError:
            return None
        return turn_id

    def turn_id_of(self, client_id: str) -> int | None:
        return self._turn_of_client.get(client_id)

    async def coach_finished(self, turn_id: int) -> None:
        await self._event(self._coach_done, turn_id).wait()

    async def close(self) -> None:
        if self._ws is not None:
            with suppress(Exception):
                await asyncio.wait_for(self._ws.close(), 5)
        if self._reader is not None:
            self._reader.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await self._reader


@dataclass
class LoadResult:
    sent: list[SentTurn]
    sockets: list[CoacheeSocket]
    started_at: float
    ended_at: float


async def _drive(
    sock: CoacheeSocket,
    *,
    label: str,
    turns: int,
    interval_s: float,
    start_at: float,
    wait_s: float,
    pause_s: float = 0.0,
) -> list[SentTurn]:
    """One coachee: send, wait for turn.done, sleep until the next send time (and at least
    `pause_s`: the coachee reads the answer before writing again); `turns` times."""
    loop = asyncio.get_running_loop()
    sent: list[SentTurn] = []
    for k in range(turns):
        await asyncio.sleep(max(0.0, start_at + k * interval_s - loop.time()))
        client_id = f"{label}-c{sock.coachee.index}-t{k}"
        text = MESSAGES[(sock.coachee.index + k) % len(MESSAGES)]
        record = SentTurn(sock.coachee.index, k, client_id, await sock.send_message(client_id, text))
        record.turn_id = await sock.wait_turn(client_id, wait_s)
        if record.turn_id is None:
            record.lost = True
            record.turn_id = sock.turn_id_of(client_id)  # accepted but never finished, if at all
        sent.append(record)
        if pause_s > 0 and k + 1 < turns:
            await asyncio.sleep(pause_s)
    return sent


async def run_load(
    http_roots: str | list[str],
    coachees: list[Coachee],
    *,
    label: str,
    turns: int,
    interval_s: float,
    wait_s: float,
    pause_s: float = 0.0,
    linger_s: float = 5.0,
) -> LoadResult:
    """Drive every coachee; their first sends are spread evenly over one interval. With several
    web processes (`http_roots`), the coachees are dealt out to them in turn, as a balancer would."""
    roots = [http_roots] if isinstance(http_roots, str) else http_roots
    sockets = [CoacheeSocket(roots[i % len(roots)], c) for i, c in enumerate(coachees)]
    try:
        await asyncio.gather(*(s.open() for s in sockets))
        loop = asyncio.get_running_loop()
        stagger = interval_s / len(sockets) if interval_s > 0 else 0.0
        first = loop.time() + 0.2
        started_at = time.time()
        drives = [
            _drive(
                s,
                label=label,
                turns=turns,
                interval_s=interval_s,
                start_at=first + i * stagger,
                wait_s=wait_s,
                pause_s=pause_s,
            )
            for i, s in enumerate(sockets)
        ]
        sent = [t for per_coachee in await asyncio.gather(*drives) for t in per_coachee]
        ended_at = time.time()
        # A Coach reply may still be streaming after turn.done under load: let it finish.
        by_index = {s.coachee.index: s for s in sockets}
        streams = [by_index[t.coachee].coach_finished(t.turn_id) for t in sent if t.turn_id is not None]
        with suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*streams), linger_s)
    finally:
        await asyncio.gather(*(s.close() for s in sockets))
    return LoadResult(sent, sockets, started_at, ended_at)
