"""RedisStreamManager: the answer's event log on Redis Streams, shared by every replica
(the contract and the in-process log: checkpoints/streams.py).

Appends are batched (one MULTI/EXEC per pass of the event loop); readers share one blocking XREAD
per process, which holds what it read for a follower still busy sending its last frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from ragline import defaults
from ragline.checkpoints.streams import Event, Fence, FenceLost, StreamEntry
from ragline.contracts import events
from ragline.contracts.state import TurnIds
from ragline.redis_clients import out_of_memory

log = logging.getLogger(__name__)

_REDIS_ID = re.compile(r"^\d{1,20}-\d{1,20}$")
LINGER_S = 2.0  # a stream stays in the shared XREAD this long after its last waiter, so re-waiting costs no wake-up
TTL_REFRESH_S = 60.0  # an append renews its stream's TTL at most this often: a log expires ttl_s after its last event, give or take this
TTL_TRACKED_MAX = 10_000  # streams whose TTL renewal is tracked before the stale ones are forgotten
HELD_MAX = 256  # entries the shared XREAD keeps per stream for its reader to come back for
REFUSED_MAX = 1024  # answers whose events Redis refused, remembered so a returning reader still learns it
STORE_FULL = ("the service's store (Redis) is full (maxmemory reached): this answer's events could not be stored, "
              "so it ends here; an operator must free memory or raise maxmemory")
_FENCE_LOST = "FENCE_LOST"
REFUSED_MS = 2**63 - 1  # the ending of a refused answer sorts after any entry Redis gave it

# KEYS: the stream, the lease, the run record. ARGV: holder, ttl ms, the event. (checkpoints/streams.py: Fence)
_FENCED_XADD = f"""
local holder = redis.call('GET', KEYS[2])
if not holder and redis.call('EXISTS', KEYS[3]) == 1 then redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
elseif holder ~= ARGV[1] then return redis.error_reply('{_FENCE_LOST} the run is held by another replica, or has ended') end
return redis.call('XADD', KEYS[1], '*', 'e', ARGV[3])
"""


@dataclass(frozen=True)
class _Append:
    key: str
    fields: dict[str, str]
    renew_ttl: bool
    future: asyncio.Future[str]
    fence: Fence | None = None


@dataclass
class _Held:
    """What the shared XREAD read of one stream since `start`, all of it: the entries that came while
    its reader was busy sending the previous ones, so that it need not read them again."""

    start: str
    entries: list[StreamEntry]

    def after(self, position: str) -> list[StreamEntry] | None:
        """The entries after `position`, or None when they may not all be here (it is before `start`)."""
        if _id_key(position) < _id_key(self.start):
            return None
        return [e for e in self.entries if _id_key(e.id) > _id_key(position)]

    def extend(self, start: str, entries: list[StreamEntry]) -> _Held:
        end = self.entries[-1].id if self.entries else self.start
        held = _Held(self.start, self.entries + entries) if start == end else _Held(start, list(entries))
        if len(held.entries) > HELD_MAX:
            dropped = len(held.entries) - HELD_MAX
            held = _Held(held.entries[dropped - 1].id, held.entries[dropped:])
        return held


class RedisStreamManager:
    """Several replicas: one Redis Stream per answer (XADD / XRANGE / XREAD BLOCK), TTL renewed by appends (at most once per TTL_REFRESH_S).

    Blocked readers share one connection: a single XREAD BLOCK per process covers every stream
    that has a waiting reader here, and a per-process wake-up stream in the same XREAD makes it
    pick up newly waiting readers at once. A process holding thousands of SSE streams thus holds
    one blocking Redis connection, not thousands.
    """

    def __init__(self, redis: Redis, *, prefix: str = "ragline:stream", ttl_s: float = defaults.STREAM_TTL_S) -> None:
        self.redis = redis
        self.prefix = prefix
        self.ttl_s = int(ttl_s)
        self._waiters: dict[str, list[tuple[str, asyncio.Future[list[StreamEntry]]]]] = {}
        self._cursor: dict[str, str] = {}  # last entry id delivered, per stream
        self._last_waited: dict[str, float] = {}  # when a reader last waited on the stream
        self._held: dict[str, _Held] = {}  # per lingering stream: what the XREADs read since its reader last waited
        self._blocking: dict[str, str] = {}  # the streams and positions of the XREAD in flight
        self._ttl_fresh_until: dict[str, float] = {}  # per stream: until when its TTL needs no renewing
        self._wake_key = f"{prefix}-wake:{uuid.uuid4().hex}"
        self._wake_id = "0-0"
        self._reader: asyncio.Task[None] | None = None
        self._outbox: list[_Append] = []  # appends waiting for the batch on its way to go
        self._sender: asyncio.Task[None] | None = None
        self._gathering = False  # the reader is about to start an XREAD: its positions are not fixed yet
        self._fenced_xadd = redis.register_script(_FENCED_XADD)
        self._refused: dict[str, list[StreamEntry]] = {}  # per stream whose append Redis refused (full): its last events
        self._refused_channel = f"{prefix}-refused"
        self._listener: asyncio.Task[None] | None = None  # hears the refusals of other replicas, once readers wait here
        self._notices: set[asyncio.Task[None]] = set()

    def key(self, session_id: str, message_id: str) -> str:
        return f"{self.prefix}:{session_id}:{message_id}"

    def valid_id(self, entry_id: str) -> bool:
        return bool(_REDIS_ID.match(entry_id))

    async def append(self, session_id: str, message_id: str, event: Event, fence: Fence | None = None) -> str:
        """Appends made while a batch is on its way go out together in the next one: one round trip
        and one MULTI/EXEC for every run's token of a loop pass, not an XADD of its own each."""
        return await self.append_soon(session_id, message_id, event, fence)  # a caller cancelled meanwhile: its append may still go out

    def append_soon(self, session_id: str, message_id: str, event: Event, fence: Fence | None = None) -> asyncio.Future[str]:
        """`append` for a caller that cannot wait (a stage emitting an event): the event joins the next
        batch, in order, and the future tells its entry id or what went wrong."""
        key = self.key(session_id, message_id)
        fields = {"e": json.dumps(event, ensure_ascii=False, separators=(",", ":"))}
        renew_ttl = self._ttl_fresh_until.get(key, 0.0) <= time.monotonic()  # not set or refreshed by this process within TTL_REFRESH_S
        pending = _Append(key, fields, renew_ttl, asyncio.get_running_loop().create_future(), fence)
        self._outbox.append(pending)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send_appends(), name="stream-appends")
        return pending.future

    async def _send_appends(self) -> None:
        """Until the outbox is empty: send what gathered in it as one transaction (each new stream's
        EXPIRE beside its XADD, so that the key never exists without its TTL)."""
        while self._outbox:
            batch, self._outbox = self._outbox, []
            try:
                await self._send_batch(batch)
            except asyncio.CancelledError:  # shutting down: nobody is left waiting for an answer that never comes
                for pending in batch + self._outbox:
                    pending.future.cancel()
                raise
            except Exception as exc:  # the connection, after the client's retries: every append of the batch failed
                for pending in batch:
                    if out_of_memory(exc):
                        self._refuse(pending)
                    _settle(pending.future, exc)

    async def _send_batch(self, batch: list[_Append]) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            renewed: set[str] = set()  # one EXPIRE per stream and batch, after its first XADD
            for pending in batch:
                if pending.fence is None:
                    pipe.xadd(pending.key, pending.fields)  # type: ignore[arg-type]  # redis-py types its fields as invariant
                else:
                    fence = pending.fence
                    await self._fenced_xadd(keys=[pending.key, fence.lease_key, fence.record_key], args=[fence.holder, fence.ttl_ms, pending.fields["e"]], client=pipe)
                if pending.renew_ttl and pending.key not in renewed:
                    pipe.expire(pending.key, self.ttl_s)
                    renewed.add(pending.key)
            replies = iter(await pipe.execute(raise_on_error=False))
        now = time.monotonic()
        for pending in batch:
            reply = next(replies)
            if pending.key in renewed:
                next(replies)
                renewed.discard(pending.key)
                self._forget_stale_ttls(now)
                self._ttl_fresh_until[pending.key] = now + TTL_REFRESH_S
            if isinstance(reply, Exception) and _FENCE_LOST in str(reply):
                reply = FenceLost(str(reply).partition(_FENCE_LOST)[2].strip())
            if isinstance(reply, Exception) and out_of_memory(reply):
                self._refuse(pending)
            elif not isinstance(reply, Exception):
                self._refused.pop(pending.key, None)  # stored again (the run taken over once Redis had room): read it
            _settle(pending.future, reply if isinstance(reply, Exception) else _text(reply))

    def _refuse(self, pending: _Append) -> None:
        """Redis refused one of this stream's events (maxmemory): its readers get an error and the end
        at once, since nothing more of the answer can reach Redis: here directly, on the other
        replicas through a PUBLISH (which Redis still takes at maxmemory: it stores nothing)."""
        event = json.loads(pending.fields["e"])
        if pending.key in self._refused or event.get("response_type") == "job":  # a job's log: its job is retried, not ended
            return
        turn = TurnIds(session_id=str(event.get("session_id", "")), request_id=str(event.get("id", "")), user_message_id="",
                       assistant_message_id=str(event.get("assistant_message_id", "")))
        ending = [events.as_json(events.error(turn, STORE_FULL, code="insufficient_storage")), events.as_json(events.complete(turn))]
        log.warning("Redis is full: the events of answer %s cannot be stored; its readers are told", pending.key)
        self._end_readers(pending.key, ending)
        notice = asyncio.create_task(self._tell_replicas(pending.key, ending), name="stream-refused-notice")
        self._notices.add(notice)
        notice.add_done_callback(self._notices.discard)

    def _end_readers(self, key: str, ending: list[Event]) -> None:
        if len(self._refused) >= REFUSED_MAX:
            del self._refused[next(iter(self._refused))]
        self._refused[key] = [StreamEntry(f"{REFUSED_MS}-{n}", event) for n, event in enumerate(ending, 1)]
        for _, future in self._waiters.pop(key, []):
            if not future.done():
                future.set_result(self._refused[key])

    async def _tell_replicas(self, key: str, ending: list[Event]) -> None:
        with contextlib.suppress(Exception):  # Redis away altogether: the other replicas' readers wait for a takeover
            await self.redis.publish(self._refused_channel, json.dumps({"key": key, "ending": ending, "from": self._wake_key}))

    async def tell(self, session_id: str, message_id: str, event: Event) -> None:
        key = self.key(session_id, message_id)
        self._show_waiters(key, event)
        with contextlib.suppress(Exception):
            await self.redis.publish(self._refused_channel, json.dumps({"key": key, "event": event, "from": self._wake_key}))

    def _show_waiters(self, key: str, event: Event) -> None:
        """`event` to each reader waiting on `key`, under the id it waits after: its next wait goes on
        from where it was, since nothing was stored."""
        for position, future in self._waiters.pop(key, []):
            if not future.done():
                future.set_result([StreamEntry(position, event)])

    async def _hear_refusals(self) -> None:
        """While this process has readers: the answers another replica could not store, ended here
        too, and what other processes `tell` readers."""
        while True:
            try:
                async with self.redis.pubsub(ignore_subscribe_messages=True) as pubsub:
                    await pubsub.subscribe(self._refused_channel)
                    while True:
                        message = await pubsub.get_message(timeout=defaults.STREAM_BLOCK_MS / 1000)
                        if message is not None:
                            notice = json.loads(message["data"])
                            if notice.get("from") == self._wake_key:
                                continue
                            if "event" in notice:
                                self._show_waiters(notice["key"], notice["event"])
                            elif notice["key"] not in self._refused:
                                self._end_readers(notice["key"], notice["ending"])
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("listening for refused answers failed; retrying", exc_info=True)
                await asyncio.sleep(1.0)

    def _forget_stale_ttls(self, now: float) -> None:
        if len(self._ttl_fresh_until) > TTL_TRACKED_MAX:
            self._ttl_fresh_until = {k: t for k, t in self._ttl_fresh_until.items() if t > now}

    async def read(self, session_id: str, message_id: str, after: str | None = None) -> list[StreamEntry]:
        start = f"({after}" if after else "-"
        rows = await self.redis.xrange(self.key(session_id, message_id), min=start, max="+")
        return [_entry(entry_id, fields or {}) for entry_id, fields in rows or []]

    def _covered(self, key: str, position: str) -> bool:
        """Whether the shared reader's next reply will hold every entry of `key` after `position`:
        its XREAD is still gathering waiters, or the one in flight reads the key from there or before."""
        if self._gathering:
            return True
        in_flight = self._blocking.get(key)
        return in_flight is not None and _id_key(in_flight) <= _id_key(position)

    async def wait(self, session_id: str, message_id: str, after: str | None, timeout: float) -> list[StreamEntry]:
        key, position = self.key(session_id, message_id), after or "0-0"
        if (ending := self._refused.get(key)) is not None:
            return [entry for entry in ending if _id_key(entry.id) > _id_key(position)]
        held = self._held.get(key)
        if held is not None and (fresh := held.after(position)) is not None:
            self._held[key] = _Held(position, fresh)  # a reader comes back from where it got to: keep only what follows
            if fresh:
                self._last_waited[key] = time.monotonic()
                return fresh
        if not self._covered(key, position):
            # Read first: entries may be there already that no XREAD will return soon. A follower back
            # for more between two frames (the common case) is covered, and skips this round trip.
            entries = await self.read(session_id, message_id, after)
            if entries:
                return entries
        future: asyncio.Future[list[StreamEntry]] = asyncio.get_running_loop().create_future()
        waiter = (position, future)
        self._waiters.setdefault(key, []).append(waiter)
        self._last_waited[key] = time.monotonic()
        self._ensure_reader()
        if not self._covered(key, position):  # the XREAD in flight would miss it: end it, the next one covers it
            await self._wake()
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            return []
        finally:
            waiting = self._waiters.get(key, [])
            if waiter in waiting:
                waiting.remove(waiter)
            if not waiting:
                self._waiters.pop(key, None)

    async def _wake(self) -> None:
        """End the XREAD in flight, so that the next one covers the waiters registered since."""
        await self.redis.xadd(self._wake_key, {"w": "1"}, maxlen=10, approximate=True)

    def _ensure_reader(self) -> None:
        if self._reader is None or self._reader.done():
            self._reader = asyncio.create_task(self._read_for_waiters(), name="stream-multiplexer")
        if self._listener is None or self._listener.done():
            self._listener = asyncio.create_task(self._hear_refusals(), name="stream-refusals")

    def _positions(self) -> dict[str, str]:
        """Where the next XREAD starts, per stream: its waiters' earliest position, or — for a stream
        whose reader is between two waits (it lingers LINGER_S) — the last entry delivered."""
        now = time.monotonic()
        for key in [k for k, t in self._last_waited.items() if k not in self._waiters and now - t > LINGER_S]:
            self._last_waited.pop(key, None)
            self._cursor.pop(key, None)
            self._held.pop(key, None)
        positions = {key: self._cursor[key] for key in self._last_waited if key in self._cursor}
        for key, waiting in self._waiters.items():
            positions[key] = min((after for after, _ in waiting), key=_id_key)
        return positions

    async def _read_for_waiters(self) -> None:
        """The one blocking reader: XREAD on every waited-for stream plus the wake-up stream.

        Under load an XREAD returns at once, with whatever one stream just appended, and the next
        one names every followed stream again: thousands of XREADs a second, each as long as the
        number of streams. So XREADs start at most every STREAM_READ_GATHER_S; while one gathers,
        a new waiter needs neither a read of its own nor a wake-up (`_covered`).
        """
        started = 0.0
        while True:
            gap = started + defaults.STREAM_READ_GATHER_S - time.monotonic()
            if gap > 0:
                self._gathering = True
                try:
                    await asyncio.sleep(gap)
                finally:
                    self._gathering = False
            positions = self._positions()
            if not positions:
                return
            started = time.monotonic()
            self._blocking = positions
            try:
                streams: dict[Any, Any] = {self._wake_key: self._wake_id, **positions}
                reply = await self.redis.xread(streams, block=defaults.STREAM_BLOCK_MS)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("blocking stream read failed; retrying", exc_info=True)
                await asyncio.sleep(0.1)
                continue
            finally:
                self._blocking = {}
            for key, rows in _xread_rows(reply):
                if key == self._wake_key:
                    self._wake_id = _text(rows[-1][0])
                    continue
                entries = [_entry(entry_id, fields) for entry_id, fields in rows]
                self._cursor[key] = entries[-1].id
                self._held[key] = self._held.get(key, _Held(positions[key], [])).extend(positions[key], entries)
                start = _id_key(positions[key])
                for waiter in list(self._waiters.get(key, [])):
                    after, future = waiter
                    if _id_key(after) < start:
                        # This XREAD began past the waiter's position (the stream was lingering at
                        # a newer cursor): entries in between are not in the reply, so handing it
                        # these would skip them. The waiter stays; the next XREAD starts at it.
                        continue
                    fresh = [e for e in entries if _id_key(e.id) > _id_key(after)]
                    if fresh and not future.done():
                        future.set_result(fresh)
                        self._waiters[key].remove(waiter)
                if not self._waiters.get(key):
                    self._waiters.pop(key, None)

    async def aclose(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
        if self._sender is not None:  # the appends already made go out first
            await asyncio.gather(self._sender, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.redis.delete(self._wake_key)


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _xread_rows(reply: Any) -> list[tuple[str, list[Any]]]:
    if not reply:
        return []
    if isinstance(reply, dict):  # RESP3
        return [(_text(key), value[0] if value and isinstance(value[0], list) else value) for key, value in reply.items()]
    return [(_text(key), rows) for key, rows in reply]


def _settle(future: asyncio.Future[str], outcome: str | BaseException) -> None:
    if future.done():  # its caller was cancelled
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _entry(entry_id: Any, fields: dict[Any, Any]) -> StreamEntry:
    raw = fields.get("e", fields.get(b"e"))
    if raw is None:
        raise ValueError(f"stream entry {_text(entry_id)} has no event field")
    return StreamEntry(_text(entry_id), json.loads(raw))
