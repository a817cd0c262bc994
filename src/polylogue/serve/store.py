"""Where session snapshots live: SQLite (default, one process) or Redis (shared by processes).

A session is stored as its JSON snapshot (:meth:`LiveConversation.to_dict`, bounded in size)
with a version number bumped at every applied event. A process keeps live objects in memory,
so it pays no deserialisation per event. Stores shared by processes (Redis, or SQLite with
``shared=True``) write each snapshot as a compare-and-set on the version: a process whose
cached copy was stale is refused, reloads the stored snapshot and applies its event again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

from polylogue.errors import PolylogueInputError

logger = logging.getLogger("polylogue.serve")


class SessionStoreError(PolylogueInputError):
    """A state location that cannot be used (bad URL, unreachable Redis, ...)."""


class SessionExistsError(PolylogueInputError):
    """A session id that is already taken (``session_id`` given twice)."""


class SessionLimitError(PolylogueInputError):
    """The store holds ``--max-sessions`` sessions already."""


class KeyedLocks:
    """One :class:`asyncio.Lock` per key while a coroutine holds or waits for it.

    Nothing is kept for a key nobody uses, so locking unknown session ids (every 404) leaves
    no state behind.
    """

    def __init__(self) -> None:
        #: key -> (lock, coroutines holding or waiting for it)
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @asynccontextmanager
    async def hold(self, key: str, timeout_s: float = 10.0) -> AsyncIterator[None]:
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            try:
                async with asyncio.timeout(timeout_s):  # no extra task, unlike wait_for
                    await lock.acquire()
            except TimeoutError:
                raise TimeoutError(f"session {key}: still busy after {timeout_s:g} s") from None
            try:
                yield
            finally:
                lock.release()
        finally:
            lock, users = self._locks[key]
            if users > 1:
                self._locks[key] = (lock, users - 1)
            else:
                del self._locks[key]


class SessionStore(Protocol):
    #: True when no other process writes this store (cached sessions are always current);
    #: otherwise :meth:`save` raises :class:`StaleSessionError` over a newer version.
    exclusive: bool

    async def create(self, sid: str, snapshot: dict[str, Any], limit: int) -> None:
        """Write a new session's first snapshot (version 0) before returning.

        Atomic: raises :class:`SessionExistsError` if ``sid`` is taken and
        :class:`SessionLimitError` if ``limit`` sessions are stored already.
        """
        ...

    async def version(self, sid: str) -> int | None: ...
    async def load(self, sid: str) -> tuple[int, dict[str, Any]] | None: ...
    async def save(self, sid: str, version: int, snapshot: dict[str, Any]) -> None: ...

    async def persist(self, sid: str) -> None:
        """Return only once ``sid``'s last saved snapshot is written (survives a crash)."""
        ...

    async def delete(self, sid: str) -> None: ...
    async def expire(self, idle_s: float) -> list[str]: ...
    async def count(self) -> int: ...
    def lock(self, sid: str, timeout_s: float = 10.0) -> Any: ...
    async def close(self) -> None: ...


class StaleSessionError(PolylogueInputError):
    """Another process changed the session while this one applied an event; resend it."""


class SQLiteStore:
    """Snapshots in one SQLite file (WAL); survives restarts of a single service process.

    Writes are *write-behind*: :meth:`save` serialises the snapshot at once (so it is the
    state after that event) and queues it; a background flush writes everything queued in one
    transaction, in a worker thread, every ``flush_s`` seconds, keeping only each session's
    newest snapshot. Reads see queued snapshots first, so this process never goes back in
    time. Durability: a graceful stop (SIGTERM/SIGINT, :meth:`close`) writes everything; a
    crash (SIGKILL) loses at most the events of the last ``flush_s`` seconds plus one write.
    ``flush_s=0`` writes every snapshot before answering its event. A new session
    (:meth:`create`) is always written before the call returns, so a session whose creation
    was answered survives a crash (``synchronous=NORMAL``: a process crash, not a power cut).

    ``shared=True`` is for several service processes on one file (``polylogue serve
    --workers N``): every snapshot is written before its event is answered, as a
    compare-and-set on the version (like :class:`RedisStore`), and a process checks the
    stored version before each event, reloading the session if another process moved it on.
    """

    def __init__(self, path: str | Path, flush_s: float = 0.05, shared: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.shared = shared
        #: True when no other process writes this file (cached sessions are always current)
        self.exclusive = not shared
        self.flush_s = 0.0 if shared else flush_s
        self.db = self._connect()
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, version INTEGER NOT NULL,"
            " snapshot TEXT NOT NULL, updated REAL NOT NULL)"
        )
        #: the flush thread's own connection (a connection is used by one thread at a time)
        self._writer = self._connect()
        self._locks = KeyedLocks()
        #: sid -> (version, snapshot JSON, time): saved but not written yet
        self._pending: dict[str, tuple[int, str, float]] = {}
        #: rows the flush thread is writing now (still visible to reads until committed)
        self._inflight: dict[str, tuple[int, str, float]] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._flush_lock = asyncio.Lock()
        #: sessions created here whose first snapshot is not written yet (for count())
        self._unwritten: set[str] = set()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="polylogue-sqlite")
        self.flush_errors = 0

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA busy_timeout=10000")  # other processes' short write transactions
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def _queued(self, sid: str) -> tuple[int, str, float] | None:
        return self._pending.get(sid) or self._inflight.get(sid)

    async def create(self, sid: str, snapshot: dict[str, Any], limit: int) -> None:
        row = (sid, 0, json.dumps(snapshot, separators=(",", ":")), time.time(), limit)
        if self.shared:
            written = self._insert_new(self.db, row)
        else:
            if self._queued(sid) is not None:
                raise SessionExistsError(f"session {sid!r} already exists")
            if await self.count() >= limit:  # sessions saved but not written yet count too
                raise SessionLimitError(f"too many sessions (limit {limit})")
            # On the flush thread, after any flush in progress (one thread: in order).
            loop = asyncio.get_running_loop()
            written = await loop.run_in_executor(
                self._executor, self._insert_new, self._writer, row
            )
        if not written:
            if await self.version(sid) is not None:
                raise SessionExistsError(f"session {sid!r} already exists")
            raise SessionLimitError(f"too many sessions (limit {limit})")

    @staticmethod
    def _insert_new(db: sqlite3.Connection, row: tuple[str, int, str, float, int]) -> bool:
        """One statement: insert unless the id exists or the table holds ``limit`` rows."""
        cur = db.execute(
            "INSERT INTO sessions(id, version, snapshot, updated) SELECT ?,?,?,? "
            "WHERE (SELECT COUNT(*) FROM sessions) < ? ON CONFLICT(id) DO NOTHING",
            row,
        )
        return cur.rowcount == 1

    async def version(self, sid: str) -> int | None:
        if (q := self._queued(sid)) is not None:
            return q[0]
        row = self.db.execute("SELECT version FROM sessions WHERE id=?", (sid,)).fetchone()
        return None if row is None else int(row[0])

    async def load(self, sid: str) -> tuple[int, dict[str, Any]] | None:
        if (q := self._queued(sid)) is not None:
            return q[0], json.loads(q[1])
        row = self.db.execute(
            "SELECT version, snapshot FROM sessions WHERE id=?", (sid,)
        ).fetchone()
        return None if row is None else (int(row[0]), json.loads(row[1]))

    async def save(self, sid: str, version: int, snapshot: dict[str, Any]) -> None:
        data = json.dumps(snapshot, separators=(",", ":"))
        if self.shared:
            self._save_if_current(sid, version, data)
            return
        self._pending[sid] = (version, data, time.time())
        if version == 0:
            self._unwritten.add(sid)
        if self.flush_s <= 0:
            await self.flush()
        elif self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_soon())

    async def persist(self, sid: str) -> None:
        """Write ``sid``'s queued snapshot now (with everything else queued: one transaction).

        Shared mode writes every snapshot before answering already. The flush waits for one in
        progress, so a snapshot taken by that flush is committed when this returns.
        """
        if not self.shared and (sid in self._pending or sid in self._inflight):
            await self.flush()
            if sid in self._pending:  # the write failed and was queued again
                raise SessionStoreError(f"session {sid}: the state could not be written")

    async def _flush_soon(self) -> None:
        await asyncio.sleep(self.flush_s)
        await self.flush()

    async def flush(self) -> None:
        """Write every queued snapshot (one transaction, in the worker thread)."""
        async with self._flush_lock:  # one flush at a time, in order (FIFO: no starvation)
            await self._flush_locked()

    async def _flush_locked(self) -> None:
        if not self._pending:
            return
        self._inflight, self._pending = self._pending, {}
        rows = [(sid, v, snap, t) for sid, (v, snap, t) in self._inflight.items()]
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._write, rows)
            self._unwritten.difference_update(self._inflight)
        except sqlite3.Error:
            # Keep them queued (newer saves win) and retry at the next flush.
            self.flush_errors += 1
            logger.exception("writing %d session snapshots failed; retrying", len(rows))
            self._pending = {**self._inflight, **self._pending}
            if self._flusher is None or self._flusher.done():
                self._flusher = asyncio.get_running_loop().create_task(self._flush_soon())
        finally:
            self._inflight = {}

    def _write(self, rows: list[tuple[str, int, str, float]]) -> None:
        with self._writer:  # one transaction
            self._writer.execute("BEGIN")
            self._writer.executemany(
                "INSERT INTO sessions(id, version, snapshot, updated) VALUES (?,?,?,?) "
                "ON CONFLICT(id) DO UPDATE SET version=excluded.version, "
                "snapshot=excluded.snapshot, updated=excluded.updated",
                rows,
            )

    def _save_if_current(self, sid: str, version: int, data: str) -> None:
        """Compare-and-set: write version ``version`` only over ``version - 1`` (or nothing)."""
        cur = self.db.execute(
            "INSERT INTO sessions(id, version, snapshot, updated) VALUES (?,?,?,?) "
            "ON CONFLICT(id) DO UPDATE SET version=excluded.version, "
            "snapshot=excluded.snapshot, updated=excluded.updated "
            "WHERE sessions.version = excluded.version - 1",
            (sid, version, data, time.time()),
        )
        if cur.rowcount != 1:
            raise StaleSessionError(f"session {sid}: changed by another process; resend")

    async def delete(self, sid: str) -> None:
        self._pending.pop(sid, None)
        self._unwritten.discard(sid)
        await self.flush()
        self.db.execute("DELETE FROM sessions WHERE id=?", (sid,))

    async def expire(self, idle_s: float) -> list[str]:
        await self.flush()
        cutoff = time.time() - idle_s
        ids = [r[0] for r in self.db.execute("SELECT id FROM sessions WHERE updated<?", (cutoff,))]
        self.db.execute("DELETE FROM sessions WHERE updated<?", (cutoff,))
        return ids

    async def count(self) -> int:
        """Sessions stored or queued (no flush: a create must not wait for the disk).

        May count a session twice for the instant its first snapshot is being committed.
        """
        stored = int(self.db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0])
        return stored + len(self._unwritten)

    def lock(self, sid: str, timeout_s: float = 10.0) -> Any:
        """Orders this process's events on one session (no state kept for unused ids)."""
        return self._locks.hold(sid, timeout_s)

    async def close(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
        await self.flush()
        self._executor.shutdown(wait=True)
        self._writer.close()
        self.db.close()


# Writes a snapshot only over the version it was derived from (compare-and-set): a process
# whose cached session was stale (another process moved it on) cannot overwrite the newer
# state; it reloads and applies its event again. KEYS: version, snapshot, index;
# ARGV: version, snapshot, ttl ms, deadline (ms since the epoch), session id.
_SAVE = """
local v = redis.call('get', KEYS[1])
local want = tonumber(ARGV[1]) - 1
if (v == false and want < 0) or (v ~= false and tonumber(v) == want) then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[3])
  redis.call('set', KEYS[2], ARGV[2], 'PX', ARGV[3])
  redis.call('zadd', KEYS[3], ARGV[4], ARGV[5])
  return 1
end
return 0
"""

# A new session: refused if the id exists (-1) or the index holds ``limit`` live sessions
# (-2). The index (a sorted set scored by expiry deadline) counts sessions without a SCAN
# over every key. KEYS: version, snapshot, index; ARGV: snapshot, ttl ms, now ms, limit, id.
_CREATE = """
redis.call('zremrangebyscore', KEYS[3], '-inf', ARGV[3])
if redis.call('exists', KEYS[1]) == 1 then return -1 end
if redis.call('zcard', KEYS[3]) >= tonumber(ARGV[4]) then return -2 end
redis.call('set', KEYS[1], '0', 'PX', ARGV[2])
redis.call('set', KEYS[2], ARGV[1], 'PX', ARGV[2])
redis.call('zadd', KEYS[3], tonumber(ARGV[3]) + tonumber(ARGV[2]), ARGV[5])
return 1
"""


class RedisStore:
    """Snapshots in Redis: any number of service processes share sessions."""

    exclusive = False

    def __init__(self, url: str, idle_s: float, prefix: str = "polylogue:") -> None:
        try:
            import redis.asyncio as aioredis
        except ImportError as e:  # pragma: no cover - depends on the install
            raise SessionStoreError(
                "--state redis://... needs: pip install 'polylogue[serve]'"
            ) from e
        self.url = url
        self.r = aioredis.from_url(url, decode_responses=True)
        self.prefix = prefix
        self.ttl_ms = max(int(idle_s * 1000), 1000)
        self._save = self.r.register_script(_SAVE)
        self._create = self.r.register_script(_CREATE)
        #: sorted set: session id -> expiry deadline (ms since the epoch), for count()
        self.index = f"{prefix}index"
        self._locks = KeyedLocks()

    def _k(self, sid: str, kind: str) -> str:
        return f"{self.prefix}{kind}:{sid}"

    def _keys(self, sid: str) -> list[str]:
        return [self._k(sid, "v"), self._k(sid, "s"), self.index]

    async def create(self, sid: str, snapshot: dict[str, Any], limit: int) -> None:
        data = json.dumps(snapshot, separators=(",", ":"))
        now_ms = int(time.time() * 1000)
        args: list[str | int] = [data, self.ttl_ms, now_ms, limit, sid]
        done = await self._create(keys=self._keys(sid), args=args)
        if done == -1:
            raise SessionExistsError(f"session {sid!r} already exists")
        if done == -2:
            raise SessionLimitError(f"too many sessions (limit {limit})")

    async def ping(self) -> None:
        try:
            await self.r.ping()
        except Exception as e:
            raise SessionStoreError(f"cannot reach Redis at {self.url}: {e}") from None

    async def version(self, sid: str) -> int | None:
        v = await self.r.get(self._k(sid, "v"))
        return None if v is None else int(v)

    async def load(self, sid: str) -> tuple[int, dict[str, Any]] | None:
        v, snap = await self.r.mget(self._k(sid, "v"), self._k(sid, "s"))
        if v is None or snap is None:
            return None
        return int(v), json.loads(snap)

    async def save(self, sid: str, version: int, snapshot: dict[str, Any]) -> None:
        """Compare-and-set: write ``version`` only over ``version - 1`` (one round trip)."""
        data = json.dumps(snapshot, separators=(",", ":"))
        deadline = int(time.time() * 1000) + self.ttl_ms
        args: list[str | int] = [version, data, self.ttl_ms, deadline, sid]
        if not await self._save(keys=self._keys(sid), args=args):
            raise StaleSessionError(f"session {sid}: changed by another process; resend")

    async def persist(self, sid: str) -> None:
        """Nothing to do: :meth:`save` wrote the snapshot before returning."""

    async def delete(self, sid: str) -> None:
        async with self.r.pipeline(transaction=True) as pipe:
            pipe.delete(self._k(sid, "s"), self._k(sid, "v"))
            pipe.zrem(self.index, sid)
            await pipe.execute()

    async def expire(self, idle_s: float) -> list[str]:
        return []  # keys carry their own TTL

    async def count(self) -> int:
        """Live sessions, from the index (expired entries dropped first): no key SCAN."""
        async with self.r.pipeline(transaction=True) as pipe:
            pipe.zremrangebyscore(self.index, "-inf", int(time.time() * 1000))
            pipe.zcard(self.index)
            _, n = await pipe.execute()
        return int(n)

    def lock(self, sid: str, timeout_s: float = 10.0) -> Any:
        """Orders this process's events on a session; other processes are kept consistent by
        the compare-and-set write, not by a lock (a lock would cost two more round trips)."""
        return self._locks.hold(sid, timeout_s)

    async def close(self) -> None:
        await self.r.aclose()


def open_store(
    state: str | None, idle_s: float, flush_s: float = 0.05, shared: bool = False
) -> SessionStore:
    """``redis://host:port/db``, ``sqlite:///path`` or a plain path (SQLite).

    ``flush_s``: SQLite's write-behind interval (see :class:`SQLiteStore`); Redis writes
    every snapshot before answering (other processes must see it). ``shared``: several
    processes use this SQLite file (``--workers``).
    """
    if state is None:
        import os

        base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
        return SQLiteStore(Path(base) / "polylogue" / "sessions.sqlite", flush_s, shared)
    if state.startswith(("redis://", "rediss://", "unix://")):
        return RedisStore(state, idle_s)
    if state.startswith("sqlite:///"):
        return SQLiteStore(state.removeprefix("sqlite:///"), flush_s, shared)
    if "://" in state:
        raise SessionStoreError(
            f"--state {state!r}: use redis://..., sqlite:///path or a file path"
        )
    return SQLiteStore(state, flush_s, shared)
