"""Auto-pipelining for the asyncio store: the commands every request issues in one event-loop turn go to Redis
together, on one connection, as one write; one reader task hands each reply to the request that sent its command.

Why: with many concurrent requests on one worker (a web server's usual load), a command per request per round trip
costs a socket write, a socket read and an event-loop wake-up each; here a turn's commands share them. Redis runs
a connection's commands in order, each script (and MULTI) atomically by itself: pipelining changes no effect's
atomicity, only how many commands one write and one read carry.

What each caller keeps of redis-py's behaviour (and of the connection pool's, for the one connection held here):

- its own replies only: an error reply (`ResponseError`, NOSCRIPT, a script's error) reaches the request that sent
  that command, and no other;
- connection faults: when the connection breaks (a write or read fails, the server closes it, a read times out
  after `socket_timeout`), every request with a reply outstanding gets the error (redis-py's `ConnectionError` or
  `TimeoutError`), the connection is disconnected and given back to the pool, and the next command takes a fresh
  one. A request whose commands failed with a `ConnectionError` sends them again once (redis-py's retry policy of
  the store: a dead connection after a Redis restart), never after a timeout;
- cancellation: a request cancelled while its reply is in flight leaves the reply to the reader, which reads and
  drops it: the connection stays in step, and no later request gets a reply that is not its own;
- commands are encoded (`pack_command`) and replies parsed (hiredis when installed) by the connection, as redis-py
  does for any command; the Redis protocol is not written here.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import redis.exceptions
from redis.commands.core import AsyncScript

from backends.redis.plan import Op
from backends.redis.runner import _split, commands, raise_first_error

#: One command: its name and arguments, as `Connection.pack_command` takes them.
Command = tuple[Any, ...]


class _Waiting:
    """A request's commands, sent or about to be: the replies read so far, and the future they go to."""

    __slots__ = ("count", "future", "replies")

    def __init__(self, count: int, future: asyncio.Future[list[Any]]) -> None:
        self.count = count
        self.future = future
        self.replies: list[Any] = []


class AutoPipeline:
    """Commands of concurrent requests, pipelined on one connection taken from `pool` (see the module docstring)."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._conn: Any = None
        self._connecting: asyncio.Lock | None = None
        #: Packed commands not written yet (written at the end of the event-loop turn that queued them).
        self._out: list[bytes] = []
        #: Requests with replies outstanding, in the order their commands were queued (= written).
        self._waiting: deque[_Waiting] = deque()
        self._writer: asyncio.Task[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        #: Set while the reader has nothing to read; the writer wakes it.
        self._idle: asyncio.Future[None] | None = None
        self._closed = False
        #: Failed attempts to connect so far: a request that waited behind one that failed fails with it.
        self._connect_failures = 0

    async def execute(self, commands: Sequence[Command]) -> list[Any]:
        """The replies to `commands`, in order; an error reply is its `ResponseError` in its place (not raised).
        Raises redis-py's `ConnectionError` / `TimeoutError` when the connection failed (after one retry of a
        `ConnectionError`)."""
        try:
            return await self._send(commands)
        except _ConnectFailed:
            raise  # Redis is not there: asking again now would only make this request, and those behind it, wait
        except redis.exceptions.ConnectionError:
            return await self._send(commands)

    async def _send(self, commands: Sequence[Command]) -> list[Any]:
        conn = self._conn
        if conn is None:
            conn = await self._connect()
        packed: list[bytes] = []
        for command in commands:
            packed += conn.pack_command(*command)
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._out += packed
        self._waiting.append(_Waiting(len(commands), future))
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write(conn))
        return await future

    async def _connect(self) -> Any:
        if self._closed:
            raise redis.exceptions.ConnectionError("the store is closed")
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        failures = self._connect_failures
        async with self._connecting:
            if self._conn is None:
                if self._connect_failures != failures:
                    # The attempt this request waited behind failed: its answer is this one's too (each waiting
                    # request trying in turn made the last of 50 wait 10 s for its 503 with Redis down).
                    raise _ConnectFailed("connecting to Redis failed")
                try:
                    conn = await self._pool.get_connection()
                except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
                    self._connect_failures += 1
                    raise _ConnectFailed(f"connecting to Redis failed ({type(exc).__name__})") from exc
                self._conn = conn
                self._reader = asyncio.get_running_loop().create_task(self._read(conn))
            return self._conn

    async def _write(self, conn: Any) -> None:
        """Write what the requests of this turn queued (and whatever is queued while a write waits), in order."""
        try:
            while self._out and self._conn is conn:
                out, self._out = self._out, []
                idle = self._idle
                if idle is not None and not idle.done():
                    idle.set_result(None)
                await conn.send_packed_command(out, check_health=False)
        except BaseException as exc:
            self._broken(conn, exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            if self._conn is conn or self._conn is None:
                self._writer = None

    async def _read(self, conn: Any) -> None:
        """Read replies in order and hand each request its own (dropping those of requests gone since)."""
        waiting = self._waiting
        loop = asyncio.get_running_loop()
        try:
            while True:
                if not waiting:
                    self._idle = loop.create_future()
                    await self._idle
                    self._idle = None
                    continue
                try:
                    reply = await conn.read_response()
                except redis.exceptions.ResponseError as error:
                    reply = error
                entry = waiting[0]
                entry.replies.append(reply)
                if len(entry.replies) == entry.count:
                    waiting.popleft()
                    if not entry.future.done():
                        entry.future.set_result(entry.replies)
        except BaseException as exc:
            self._broken(conn, exc)
            if not isinstance(exc, Exception):
                raise

    def _broken(self, conn: Any, exc: BaseException) -> None:
        """The connection failed (or the store closes): every outstanding request gets the error; the connection
        is disconnected and given back to the pool; the next command takes another."""
        if self._conn is not conn:
            return
        self._conn = None
        self._out = []
        waiting, self._waiting = self._waiting, deque()
        for entry in waiting:
            if not entry.future.done():
                entry.future.set_exception(_fault(exc))
        for task in (self._reader, self._writer):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        self._reader = self._writer = None
        idle, self._idle = self._idle, None
        if idle is not None and not idle.done():
            idle.cancel()
        asyncio.get_running_loop().create_task(self._release(conn))

    async def _release(self, conn: Any) -> None:
        try:
            await conn.disconnect()
        finally:
            await self._pool.release(conn)

    async def run(self, ops: list[Op], scripts: Mapping[str, AsyncScript]) -> list[Any]:
        """The replies to a store's plan operations `ops` (a Batch: the list of its calls' replies), their commands
        sent together, and with those of concurrent requests. A script the server does not know (a restart, SCRIPT
        FLUSH: the reply NOSCRIPT, so it did not run) is loaded and run again, on its own. The first error reply is
        raised, as a redis-py pipeline raises it."""
        sent = commands(ops, scripts)
        raw = await self.execute(sent)
        for at, reply in enumerate(raw):
            if isinstance(reply, redis.exceptions.NoScriptError) and sent[at][0] == "EVALSHA":
                source = next(script.script for script in scripts.values() if script.sha == sent[at][1])
                loaded, again = await self.execute((("SCRIPT", "LOAD", source), sent[at]))
                raw[at] = again if not isinstance(loaded, redis.exceptions.ResponseError) else loaded
        replies = _split(raw, ops)
        raise_first_error(replies, ops)
        return replies

    async def aclose(self) -> None:
        """Fail what is outstanding and give the connection back to the pool."""
        self._closed = True
        conn = self._conn
        if conn is None:
            return
        self._broken(conn, redis.exceptions.ConnectionError("the store is closed"))
        await asyncio.sleep(0)  # let the release run


class _ConnectFailed(redis.exceptions.ConnectionError):
    """No connection could be made (after redis-py's own retry of the connect): not retried by `execute`."""


def _fault(exc: BaseException) -> BaseException:
    """What a request waiting on a failed connection raises: redis-py's own error when the connection raised one
    (a fresh instance per request), else a `ConnectionError` naming the cause's type."""
    if isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
        return type(exc)(*exc.args)
    if isinstance(exc, asyncio.CancelledError):
        return redis.exceptions.ConnectionError("the connection's reader was cancelled")
    return redis.exceptions.ConnectionError(f"connection failed ({type(exc).__name__})")
