"""Process faults with real processes: a Celery worker SIGKILLed while the trio runs, Redis
restarted mid-turn, Daphne restarted while a client is connected.

Each test runs its own Redis server on a free port (the shared one on 6379 is never touched),
with its own Daphne and Celery worker pointed at it, the test database, and the simulator.
After every fault: every user message is persisted, the turn is completed or explicitly failed,
and a client that reconnects and resumes sees every persisted event once and no message twice.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
from asgiref.sync import sync_to_async

from agents.models import AgentRun, CoachingSession, Message, Role, Turn, TurnStatus
from agents.roles.schemas import SERVER_EVENTS
from agents.turns.sessions import session_start
from tests.conftest import (
    OUTPUT_DIR,
    ROOT,
    VENV_BIN,
    ChatClient,
    LiveStack,
    _wait_http,
    _wait_worker,
    free_port,
    login_cookie,
    make_coachee,
    stack_env,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
    pytest.mark.usefixtures("close_thread_connections"),
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server to start a private Redis"),
]

TEXT = "I keep planning to run and never do."
# Specialists answer slowly, so the trio is surely in flight when the fault strikes.
SLOW_TRIO = {agent: {"ttft_ms": 3000} for agent in ("persona", "plasticity", "stability")}


# --- Processes ----------------------------------------------------------------------------


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

    def log(self, what: str) -> Any:
        self.starts += 1
        return (OUTPUT_DIR / f"{self.name}-{what}-{self.starts}.log").open("wb")

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
        _wait_worker(self.env, 60)
        return worker

    def start_web(self) -> None:
        self.web = subprocess.Popen(
            [str(VENV_BIN / "daphne"), "-b", "127.0.0.1", "-p", str(self.web_port), "coaching_site.asgi:application"],
            env=self.env, cwd=ROOT, stdout=self.log("web"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        _wait_http(f"{self.live.http_url}/healthz", 30)

    def stop_web(self) -> None:
        assert self.web is not None
        self.web.terminate()
        try:
            self.web.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.web.kill()
            self.web.wait()

    def stop_all(self) -> None:
        for proc in [*self.workers, self.web, self.redis_proc]:
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def make_stack() -> Iterator[Any]:
    stacks: list[ProcessStack] = []

    def make(name: str, *, deadline_s: float, **extra_env: str) -> ProcessStack:
        stack = ProcessStack(name, deadline_s, extra_env)
        stacks.append(stack)
        stack.start_redis()
        stack.start_worker()
        stack.start_web()
        return stack

    yield make
    for stack in stacks:
        stack.stop_all()


# --- The client side ----------------------------------------------------------------------


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


async def wait_for_trio_in_flight(sim: Any, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        calls = await asyncio.to_thread(sim.calls)
        running = {c["agent"] for c in calls if c.get("finished_at") is None}
        if {"persona", "plasticity", "stability"} <= running:
            return
        await asyncio.sleep(0.1)
    raise TimeoutError("the trio never started")


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


# --- The faults ---------------------------------------------------------------------------


async def test_a_worker_killed_during_the_trio_is_replaced_and_the_trio_redelivered(
    make_stack: Any, live_sim: Any
) -> None:
    # Redelivery of a dead worker's tasks waits for the visibility timeout; seconds here, with
    # the time limits below it as in production.
    stack = await asyncio.to_thread(
        make_stack,
        "killworker",
        deadline_s=45,
        CELERY_VISIBILITY_TIMEOUT_S="8",
        CELERY_UNACKED_RESTORE_INTERVAL_S="1",
        CELERY_TASK_SOFT_TIME_LIMIT="6",
        CELERY_TASK_TIME_LIMIT="7",
    )
    live_sim.configure(agents=SLOW_TRIO)
    convo = await conversation(stack, "kill-worker")
    client, turn_id = await first_turn_with_trio_in_flight(convo, live_sim)
    stack.workers[0].send_signal(signal.SIGKILL)
    stack.workers[0].wait(timeout=10)
    killed_at = time.monotonic()
    await asyncio.to_thread(stack.start_worker)
    await convo.until_turn_done(client, turn_id, timeout_s=60)
    await client.__aexit__()
    await finish(convo, turn_id, timeout_s=30)
    took = time.monotonic() - killed_at

    summary = await sync_to_async(assert_consistent)(convo, turns=1)
    # acks_late: each specialist ran again on the new worker (two calls: killed, redelivered),
    # and the turn got Synth's reply, not the watchdog's fallback.
    for agent in ("persona", "plasticity", "stability"):
        assert len(live_sim.calls(agent=agent)) == 2, agent
    assert synth_reply(convo, turn_id)["fallback"] is False
    print(f"\nworker SIGKILL during the trio: redelivered, turn done {took:.1f} s after the kill; {summary}")


def exits_within(process: Any, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return True
        time.sleep(0.1)
    return False


async def test_redis_restarted_mid_turn(make_stack: Any, live_sim: Any) -> None:
    stack = await asyncio.to_thread(make_stack, "redisrestart", deadline_s=20)
    live_sim.configure(agents=SLOW_TRIO)
    convo = await conversation(stack, "redis-restart")
    client, turn_id = await first_turn_with_trio_in_flight(convo, live_sim)
    await asyncio.to_thread(stack.stop_redis)  # everything in Redis is lost
    await asyncio.sleep(1.0)
    await asyncio.to_thread(stack.start_redis)
    await convo.until_turn_done(client, turn_id, timeout_s=30)
    with suppress(Exception):
        await client.__aexit__()
    await finish(convo, turn_id, timeout_s=30)  # reconnect and resume if the socket missed it
    first = synth_reply(convo, turn_id)
    # kombu 5.7 can crash the worker while it reconnects ("Unrecoverable error: AttributeError
    # ... 'hostname'" in Channel.close), seconds after Redis is back and possibly after the
    # turn has ended. Production runs workers under a supervisor that restarts them; do what
    # it would, and report it.
    worker_restarted = await asyncio.to_thread(exits_within, stack.workers[-1], 8.0)
    if worker_restarted:
        await asyncio.to_thread(stack.start_worker)

    # The system is whole again: the next message gets a full answer.
    client = await convo.connect()
    await client.send({"type": "user.message", "client_id": "c-2", "text": "Tomorrow I will try again."})
    second = (await client.until(lambda e: e["type"] == "message.accepted" and e["client_id"] == "c-2"))["turn_id"]
    await convo.until_turn_done(client, second, timeout_s=40)
    await client.__aexit__()
    await finish(convo, second, timeout_s=30)

    summary = await sync_to_async(assert_consistent)(convo, turns=2)
    assert synth_reply(convo, second)["fallback"] is False
    print(
        f"\nredis restarted mid-turn: first turn fallback={first['fallback']}, worker died and was restarted: "
        f"{worker_restarted}; the next turn delivered; {summary}"
    )


async def test_daphne_restarted_while_a_client_is_connected(make_stack: Any, live_sim: Any) -> None:
    stack = await asyncio.to_thread(make_stack, "daphnerestart", deadline_s=25)
    live_sim.configure(agents=SLOW_TRIO)
    convo = await conversation(stack, "daphne-restart")
    client, turn_id = await first_turn_with_trio_in_flight(convo, live_sim, after="coach.done")
    await asyncio.to_thread(stack.stop_web)
    seen_before = convo.last_seq
    with suppress(Exception):
        await client.next_event(5)  # the close
    await asyncio.to_thread(stack.start_web)
    # The client sends its message again after reconnecting (as the chat page's outbox does):
    # the server recognises the client_id and starts nothing twice.
    client = await convo.connect()
    await client.send({"type": "user.message", "client_id": "c-1", "text": TEXT})
    await convo.until_turn_done(client, turn_id, timeout_s=40)
    await client.__aexit__()
    await finish(convo, turn_id, timeout_s=30)

    summary = await sync_to_async(assert_consistent)(convo, turns=1)
    assert convo.last_seq > seen_before  # the rest arrived after the restart
    assert synth_reply(convo, turn_id)["fallback"] is False
    print(f"\ndaphne restarted with a client connected: resumed after seq {seen_before}; {summary}")


async def test_daphne_killed_mid_coach_stream_leaves_no_reply_streaming_for_ever(
    make_stack: Any, live_sim: Any
) -> None:
    deadline_s = 20.0
    stack = await asyncio.to_thread(make_stack, "daphnekill", deadline_s=deadline_s)
    live_sim.configure(agents={"coach": {"tokens_per_s": 8, "output_tokens": 400}})
    convo = await conversation(stack, "daphne-kill")
    client = await convo.connect()
    await client.send({"type": "user.message", "client_id": "c-1", "text": TEXT})
    await client.until(lambda e: e["type"] == "coach.delta")
    await asyncio.sleep(2.5)  # past a snapshot of the partial text (every second)
    turn_id = convo.turn_id()
    assert turn_id is not None
    assert stack.web is not None
    stack.web.send_signal(signal.SIGKILL)  # no graceful ending for the stream
    stack.web.wait(timeout=10)
    await asyncio.to_thread(stack.start_web)
    await finish(convo, turn_id, timeout_s=40)
    # A reconnected client is shown the reply so far, still streaming; the watchdog closes it
    # after the deadline, and the client sees it end, once.
    client = await convo.connect()
    with suppress(TimeoutError):
        await client.until(lambda e: e["type"] == "coach.done", timeout_s=deadline_s + 10)
    await client.__aexit__()
    assert any(e["type"] == "coach.snapshot" for e in convo.events)

    summary = await sync_to_async(assert_consistent)(convo, turns=1)
    coach = await sync_to_async(Message.objects.get)(session=convo.session, role=Role.COACH)
    assert coach.status == "failed"
    assert coach.text  # what was streamed before the crash is kept
    ends = [e for e in convo.events if e["type"] == "coach.done"]
    assert {e["seq"] for e in ends} == {ends[0]["seq"]}
    assert ends[0]["status"] == "failed"
    run = await sync_to_async(AgentRun.objects.get)(turn_id=turn_id, agent="coach")
    assert run.status == "failed"
    print(f"\ndaphne SIGKILLed mid-Coach-stream: coach reply closed as interrupted by the watchdog; {summary}")
