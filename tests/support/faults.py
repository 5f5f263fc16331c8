"""The process-fault machinery: a stack whose processes a test kills or restarts, and the
checks that a conversation survived (nothing lost, nothing stored twice)."""

from __future__ import annotations

import asyncio
import subprocess
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from asgiref.sync import sync_to_async

from agents.models import AgentRun, CoachingSession, Message, Role, Turn, TurnStatus
from agents.roles.schemas import SERVER_EVENTS
from agents.turns.sessions import session_start
from tests.support.people import make_coachee
from tests.support.stack import (
    OUTPUT_DIR,
    ROOT,
    VENV_BIN,
    ChatClient,
    LiveStack,
    free_port,
    login_cookie,
    stack_env,
    wait_http,
    wait_worker,
)

TEXT = "I keep planning to run and never do."


# Specialists answer slowly, so the trio is surely in flight when the fault strikes.
SLOW_TRIO = {agent: {"ttft_ms": 3000} for agent in ("persona", "plasticity", "stability")}


@dataclass
class ProcessStack:
    """Redis, Daphne and a Celery worker of our own, each restartable on its own."""

    name: str
    deadline_s: float
    extra_env: dict[str, str] = field(default_factory=dict)
    redis_port: int = field(default_factory=free_port)
    web_port: int = field(default_factory=free_port)
    redis_proc: subprocess.Popen[bytes] | None = None
    web: subprocess.Popen[bytes] | None = None
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    webs: list[subprocess.Popen[bytes]] = field(default_factory=list)  # every Daphne started, to stop them all
    starts: int = 0

    @property
    def env(self) -> dict[str, str]:
        return stack_env(
            REDIS_URL=f"redis://127.0.0.1:{self.redis_port}",
            REDIS_DB_BASE="0",
            COACHING_TURN_DEADLINE_S=str(self.deadline_s),
            **self.extra_env,
        )

    @property
    def live(self) -> LiveStack:
        return LiveStack(f"http://127.0.0.1:{self.web_port}", f"ws://127.0.0.1:{self.web_port}")

    def log_path(self, what: str) -> Path:
        self.starts += 1
        return OUTPUT_DIR / f"{self.name}-{what}-{self.starts}.log"

    def log(self, what: str) -> Any:
        return self.log_path(what).open("wb")

    def start_redis(self) -> None:
        # No snapshot, no append-only file: a restart loses everything, the worst case.
        self.redis_proc = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=self.log("redis"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        client = redis.Redis(port=self.redis_port)
        deadline = time.monotonic() + 10
        while True:
            with suppress(redis.ConnectionError):
                if client.ping():
                    return
            if time.monotonic() > deadline:
                raise RuntimeError("private redis-server did not start")
            time.sleep(0.1)

    def stop_redis(self) -> None:
        assert self.redis_proc is not None
        self.redis_proc.terminate()
        self.redis_proc.wait(timeout=10)

    def start_worker(self) -> subprocess.Popen[bytes]:
        worker = subprocess.Popen(
            [
                str(VENV_BIN / "celery"), "-A", "coaching_site", "worker", "-P", "threads", "-c", "8",
                "-l", "INFO", "--without-gossip", "--without-mingle",
                "-n", f"{self.name}-{len(self.workers)}-{self.redis_port}@%h",
            ],
            env=self.env, cwd=ROOT, stdout=self.log("worker"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.workers.append(worker)
        wait_worker(self.env)
        return worker

    def start_web(self) -> None:
        self.web = self.serve_on(self.web_port)

    def start_standby_web(self) -> tuple[subprocess.Popen[bytes], int]:
        """A second Daphne on a port of its own, serving beside the first, as a deployment runs
        more than one: a test that kills the first moves its clients to this one at once, where
        a restart would take seconds on a busy machine (Django's import, the crisis model)."""
        port = free_port()
        return self.serve_on(port), port

    def fail_over(self, standby: tuple[subprocess.Popen[bytes], int]) -> None:
        """From now on `web` and the clients' address are the standby's."""
        self.web, self.web_port = standby

    def serve_on(self, port: int) -> subprocess.Popen[bytes]:
        log = self.log_path("web")
        web = subprocess.Popen(
            [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(port), "coaching_site.asgi:application"],
            env=self.env, cwd=ROOT, stdout=log.open("wb"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.webs.append(web)
        wait_http(f"http://127.0.0.1:{port}/healthz", process=web, log=log)
        return web

    def stop_web(self) -> None:
        assert self.web is not None
        self.web.terminate()
        try:
            self.web.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.web.kill()
            self.web.wait()

    def stop_all(self) -> None:
        for proc in [*self.workers, *self.webs, self.redis_proc]:
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@dataclass
class Conversation:
    """What one coachee's client saw, over however many connections it took."""

    stack: ProcessStack
    session: CoachingSession
    cookie: str
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def last_seq(self) -> int:
        return max((e["seq"] for e in self.events if "seq" in e), default=0)

    async def connect(self, timeout_s: float = 30) -> ChatClient:
        """Connect (retrying while the server is down) and resume after the last seq seen."""
        deadline = time.monotonic() + timeout_s
        while True:
            client = ChatClient(self.stack.live, self.session, self.cookie)
            try:
                await client.__aenter__()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.3)
        client.events = self.events  # one log across connections
        await client.send({"type": "resume", "after_seq": self.last_seq})
        return client

    async def until_turn_done(self, client: ChatClient, turn_id: int | None, timeout_s: float) -> bool:
        """Read until turn.done for the turn; False if the connection dropped or went quiet."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.turn_done(turn_id):
                return True
            try:
                await client.next_event(max(0.1, deadline - time.monotonic()))
            except Exception:  # closed by a restart, or nothing came
                return self.turn_done(turn_id)
        return self.turn_done(turn_id)

    def turn_done(self, turn_id: int | None) -> bool:
        return any(e["type"] == "turn.done" and (turn_id is None or e["turn_id"] == turn_id) for e in self.events)

    def turn_id(self) -> int | None:
        return next((e["turn_id"] for e in self.events if e["type"] == "message.accepted"), None)


async def conversation(stack: ProcessStack, username: str) -> Conversation:
    user = await sync_to_async(make_coachee)(username)
    session = await sync_to_async(session_start)(user_id=user.pk)
    cookie = await sync_to_async(login_cookie)(username, "")
    return Conversation(stack, session, cookie)


async def finish(convo: Conversation, turn_id: int, *, timeout_s: float) -> None:
    """Keep reconnecting and resuming until the turn's end has been seen."""
    deadline = time.monotonic() + timeout_s
    while not convo.turn_done(turn_id) and time.monotonic() < deadline:
        client = await convo.connect(timeout_s=max(1.0, deadline - time.monotonic()))
        try:
            await convo.until_turn_done(client, turn_id, timeout_s=max(1.0, min(10.0, deadline - time.monotonic())))
        finally:
            with suppress(Exception):
                await client.__aexit__()
    assert convo.turn_done(turn_id), [e["type"] for e in convo.events]


def assert_consistent(convo: Conversation, *, turns: int) -> dict[str, Any]:
    """Every persisted event seen exactly once after dedup by seq, no gaps, no message twice,
    and the database agrees: one user, one coach and one final message per turn."""
    for event in convo.events:
        SERVER_EVENTS[event["type"]].model_validate(event)
    by_seq: dict[int, dict[str, Any]] = {}
    for event in convo.events:
        if "seq" in event:
            # The client keeps the first copy of a seq: a replayed copy must be identical.
            assert by_seq.setdefault(event["seq"], event) == event, event
    seqs = sorted(by_seq)
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    visible = [
        e["message_id"] for e in by_seq.values() if e["type"] in ("message.accepted", "coach.done", "synth.done")
    ]
    assert len(visible) == len(set(visible)), visible

    session_id = convo.session.pk
    roles = list(Message.objects.filter(session_id=session_id).values_list("role", flat=True))
    turn_rows = list(Turn.objects.filter(session_id=session_id))
    assert len(turn_rows) == turns
    assert roles.count(Role.USER) == turns
    assert roles.count(Role.COACH) <= turns
    assert roles.count(Role.SYNTH) == turns
    assert all(t.status == TurnStatus.DONE and t.synth_message_id for t in turn_rows), [t.status for t in turn_rows]
    assert set(visible) == set(Message.objects.filter(session_id=session_id).values_list("pk", flat=True))
    runs = list(AgentRun.objects.filter(turn__session_id=session_id).values_list("turn_id", "agent", "round"))
    assert len(runs) == len(set(runs))  # idempotent per (turn, agent, round)
    return {"events": len(convo.events), "persisted": len(seqs), "turns": [(t.pk, t.degraded) for t in turn_rows]}


async def first_turn_with_trio_in_flight(
    convo: Conversation, sim: Any, *, after: str = "message.accepted"
) -> tuple[ChatClient, int]:
    """Send the first message, wait for the `after` event and for the trio's model calls to be
    in flight: the moment each fault is injected. Returns the client and the turn."""
    client = await convo.connect()
    await client.send({"type": "user.message", "client_id": "c-1", "text": TEXT})
    await client.until(lambda e: e["type"] == after)
    await wait_for_trio_in_flight(sim)
    turn_id = convo.turn_id()
    assert turn_id is not None
    return client, turn_id


def synth_reply(convo: Conversation, turn_id: int) -> dict[str, Any]:
    return next(e for e in convo.events if e["type"] == "synth.done" and e["turn_id"] == turn_id)


async def wait_for_trio_in_flight(sim: Any, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        calls = await asyncio.to_thread(sim.calls)
        running = {c["agent"] for c in calls if c.get("finished_at") is None}
        if {"persona", "plasticity", "stability"} <= running:
            return
        await asyncio.sleep(0.1)
    raise TimeoutError("the trio never started")
