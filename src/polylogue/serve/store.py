"""Where session snapshots live: SQLite (default, one process) or Redis (shared by processes).

A session is stored as its JSON snapshot (:meth:`LiveConversation.to_dict`, bounded in size)
with a version number bumped at every applied event. A process keeps live objects in memory,
so it pays no deserialisation per event. Stores shared by processes (Redis, or SQLite with
``shared=True``) write each snapshot as a compare-and-set on the version: a process whose
cached copy was stale is refused, reloads the stored snapshot and applies its event again.
"""

from __future__ import annotations

import asyncio
import contextlib
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

#: Where :meth:`SessionStore.load` puts a roster stored apart from the snapshot (parsed JSON).
#: The roster (who takes part, who is present) is written only when it changes: with 5,000
#: people it is most of a snapshot's bytes, and it rarely changes from one event to the next.
ROSTER_KEY = "serve_roster"

#: A queued SQLite write: version, snapshot JSON, time, roster JSON (None: unchanged).
_Entry = tuple[int, str, float, str | None]


def _newer(older: _Entry | None, newer: _Entry) -> _Entry:
    """``newer``, carrying ``older``'s roster when ``newer`` leaves it unchanged."""
    if newer[3] is None and older is not None and older[3] is not None:
        return (*newer[:3], older[3])
    return newer


def _merged(older: dict[str, _Entry], newer: dict[str, _Entry]) -> dict[str, _Entry]:
    """Two write queues as one (newer snapshots win; no roster change is dropped)."""
    out = dict(older)
    for sid, entry in newer.items():
        out[sid] = _newer(older.get(sid), entry)
    return out


class SessionStoreError(PolylogueInputError):
    """A state location that cannot be used (bad URL, unreachable Redis, ...)."""


class SessionExistsError(PolylogueInputError):
    """A session id that is already taken (``session_id`` given twice)."""


class SessionLimitError(PolylogueInputError):
    """The store holds ``--max-sessions`` sessions already."""


class StoreUnavailableError(RuntimeError):
    """The state store cannot take or give state now (a full disk, Redis down, stalled or out
    of memory): nothing was applied; answered 503 with ``Retry-After``. Not the client's fault,
    so not a :class:`PolylogueInputError`."""

    #: seconds a client waits before sending again (the ``Retry-After`` header)
    retry_after_s = 1


class SessionGoneError(PolylogueInputError):
    """A session the store answered for that vanished before its idle expiry (Redis evicted
    it): answered 410, never as if it were still there."""


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

    async def create(
        self, sid: str, snapshot: dict[str, Any], limit: int, roster: str | None = None
    ) -> None:
        """Write a new session's first snapshot (version 0) and roster before returning.

        Atomic: raises :class:`SessionExistsError` if ``sid`` is taken and
        :class:`SessionLimitError` if ``limit`` sessions are stored already.
        """
        ...

    async def version(self, sid: str) -> int | None: ...
    async def load(self, sid: str) -> tuple[int, dict[str, Any]] | None: ...
    async def save(
        self,
        sid: str,
        version: int,
        snapshot: dict[str, Any],
        durable: bool = False,
        roster: str | None = None,
    ) -> None:
        """Store ``snapshot``; ``durable``: written (survives a crash) before returning;
        ``roster``: the roster's JSON when it changed (None: the stored one still holds).

        Raises :class:`StoreUnavailableError` when the snapshot was not taken (nothing kept).
        """
        ...

    def health(self) -> dict[str, Any] | Any:
        """``{"kind", "state": "ok" | "failing" | "unavailable", ...}`` (may be awaitable)."""
        ...

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
            " snapshot TEXT NOT NULL, updated REAL NOT NULL, roster TEXT)"
        )
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(sessions)")}
        if "roster" not in columns:  # a file from before rosters were stored apart
            # (another process may have added it a moment ago)
            with contextlib.suppress(sqlite3.OperationalError):
                self.db.execute("ALTER TABLE sessions ADD COLUMN roster TEXT")
        #: the flush thread's own connection (a connection is used by one thread at a time)
        self._writer = self._connect()
        self._locks = KeyedLocks()
        #: sid -> (version, snapshot JSON, time): saved but not written yet
        self._pending: dict[str, _Entry] = {}
        #: rows the flush thread is writing now (still visible to reads until committed)
        self._inflight: dict[str, _Entry] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._flush_lock = asyncio.Lock()
        #: sessions created here whose first snapshot is not written yet (for count())
        self._unwritten: set[str] = set()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="polylogue-sqlite")
        self.flush_errors = 0
        #: why the last write failed (None: the last write succeeded); while set, every
        #: snapshot is written before its answer, and refused (503) if that write fails
        self.failing: str | None = None
        #: writes the queue again every ``retry_s`` while a write fails (a freed disk is used
        #: at once, not only when the next event arrives)
        self._retry: asyncio.Task[None] | None = None
        self.retry_s = 0.25
        #: how long a stop keeps trying to write a queue the disk refuses
        self.stop_wait_s = 5.0

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA busy_timeout=10000")  # other processes' short write transactions
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        # A write-ahead log of at most ~1 MB (checkpointed every 256 pages, truncated back
        # to 1 MB after): on a small disk the log alone must not take all the space the
        # checkpoint needs to move it into the database (SQLite's 4 MB default can).
        db.execute("PRAGMA wal_autocheckpoint=256")
        db.execute("PRAGMA journal_size_limit=1048576")
        return db

    def _queued(self, sid: str) -> _Entry | None:
        return self._pending.get(sid) or self._inflight.get(sid)

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
        """Rows of a read on the loop's connection; a database error is the store's, not a
        bug (503, not 500)."""
        try:
            return self.db.execute(sql, args).fetchall()
        except sqlite3.Error as e:
            raise StoreUnavailableError(f"the session store cannot be read: {e}") from None

    def health(self) -> dict[str, Any]:
        """The store's state for ``/healthz``: ``ok`` or ``failing`` (why, and what waits)."""
        out: dict[str, Any] = {"kind": "sqlite", "state": "failing" if self.failing else "ok"}
        if self.failing:
            out["error"] = self.failing
        out["queued"] = len(self._pending) + len(self._inflight)
        return out

    async def create(
        self, sid: str, snapshot: dict[str, Any], limit: int, roster: str | None = None
    ) -> None:
        data = json.dumps(snapshot, separators=(",", ":"))
        row = (sid, 0, data, time.time(), roster, limit)
        if self.shared:
            try:
                written = self._insert_new(self.db, row)
            except sqlite3.Error as e:
                raise StoreUnavailableError(f"the new session could not be written: {e}") from None
        else:
            if self._queued(sid) is not None:
                raise SessionExistsError(f"session {sid!r} already exists")
            if await self.count() >= limit:  # sessions saved but not written yet count too
                raise SessionLimitError(f"too many sessions (limit {limit})")
            # On the flush thread, after any flush in progress (one thread: in order).
            loop = asyncio.get_running_loop()
            try:
                written = await loop.run_in_executor(
                    self._executor, self._insert_new, self._writer, row
                )
            except sqlite3.Error as e:  # a full disk: the session does not exist
                raise StoreUnavailableError(f"the new session could not be written: {e}") from None
        if not written:
            if await self.version(sid) is not None:
                raise SessionExistsError(f"session {sid!r} already exists")
            raise SessionLimitError(f"too many sessions (limit {limit})")

    @staticmethod
    def _insert_new(
        db: sqlite3.Connection, row: tuple[str, int, str, float, str | None, int]
    ) -> bool:
        """One statement: insert unless the id exists or the table holds ``limit`` rows."""
        cur = db.execute(
            "INSERT INTO sessions(id, version, snapshot, updated, roster) SELECT ?,?,?,?,? "
            "WHERE (SELECT COUNT(*) FROM sessions) < ? ON CONFLICT(id) DO NOTHING",
            row,
        )
        return cur.rowcount == 1

    async def version(self, sid: str) -> int | None:
        if (q := self._queued(sid)) is not None:
            return q[0]
        rows = self._read("SELECT version FROM sessions WHERE id=?", (sid,))
        return int(rows[0][0]) if rows else None

    async def load(self, sid: str) -> tuple[int, dict[str, Any]] | None:
        """The newest snapshot (queued first), with the roster under :data:`ROSTER_KEY` when
        it is stored apart."""
        if (q := self._queued(sid)) is not None:
            roster = q[3]
            if roster is None:
                rows = self._read("SELECT roster FROM sessions WHERE id=?", (sid,))
                roster = rows[0][0] if rows else None
            return q[0], _with_roster(json.loads(q[1]), roster)
        rows = self._read("SELECT version, snapshot, roster FROM sessions WHERE id=?", (sid,))
        if not rows:
            return None
        return int(rows[0][0]), _with_roster(json.loads(rows[0][1]), rows[0][2])

    async def save(
        self,
        sid: str,
        version: int,
        snapshot: dict[str, Any],
        durable: bool = False,
        roster: str | None = None,
    ) -> None:
        """Queue ``sid``'s snapshot (written within ``flush_s``), or write it now.

        Written before returning when ``durable`` (a control event), with ``flush_s=0``, and
        while the store is failing: then a write that fails raises
        :class:`StoreUnavailableError` and the snapshot is not kept (the caller answers 503
        and does not apply the event), so nothing is acknowledged that the disk refused.
        """
        data = json.dumps(snapshot, separators=(",", ":"))
        if self.shared:
            try:
                self._save_if_current(sid, version, data, roster)
            except sqlite3.Error as e:
                raise StoreUnavailableError(f"session {sid}: not written: {e}") from None
            return
        entry: _Entry = (version, data, time.time(), roster)
        if durable or self.flush_s <= 0 or self.failing is not None:
            await self._write_through(sid, entry)
            return
        self._pending[sid] = _newer(self._pending.get(sid), entry)
        if version == 0:
            self._unwritten.add(sid)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_soon())

    async def _write_through(self, sid: str, entry: _Entry) -> None:
        """Write ``entry`` (and everything queued) now; on failure, forget ``entry`` again."""
        async with self._flush_lock:
            before = self._pending.get(sid)  # under the lock nothing is in flight
            entry = _newer(before, entry)
            self._pending[sid] = entry
            await self._flush_locked()
            if self._pending.get(sid) is entry:  # the write failed: not applied
                if before is None:
                    del self._pending[sid]
                else:
                    self._pending[sid] = before
                raise StoreUnavailableError(
                    f"session {sid}: the state could not be written ({self.failing}); "
                    "the event was not applied, send it again"
                )

    async def persist(self, sid: str) -> None:
        """Write ``sid``'s queued snapshot now (with everything else queued: one transaction).

        Shared mode writes every snapshot before answering already. The flush waits for one in
        progress, so a snapshot taken by that flush is committed when this returns.
        """
        if not self.shared and (sid in self._pending or sid in self._inflight):
            await self.flush()
            if sid in self._pending:  # the write failed and was queued again
                raise StoreUnavailableError(
                    f"session {sid}: the state could not be written ({self.failing})"
                )

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
        rows = [(sid, *entry) for sid, entry in self._inflight.items()]
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._write, rows)
        except asyncio.CancelledError:  # a stop: the thread may or may not write them
            self._pending = _merged(self._inflight, self._pending)  # written again: harmless
            raise
        except Exception as e:  # sqlite3.Error, OSError: a full or read-only disk
            self._on_write_error(e, len(rows))
        else:
            self._unwritten.difference_update(self._inflight)
            if self.failing is not None:
                logger.warning("session store writable again: %d snapshots written", len(rows))
            self.failing = None
        finally:
            self._inflight = {}

    def _on_write_error(self, e: Exception, n: int) -> None:
        """Keep the rows queued (newer saves win) and write them again every ``retry_s``."""
        self.flush_errors += 1
        if self.failing is None:  # once per failing period, not once per retry
            logger.error(
                "writing %d session snapshots failed (%s: %s); events are refused (503) "
                "until the store takes writes again",
                n,
                type(e).__name__,
                e,
            )
        self.failing = f"{type(e).__name__}: {e}"
        self._pending = _merged(self._inflight, self._pending)
        if self._retry is None or self._retry.done():
            self._retry = asyncio.get_running_loop().create_task(self._retry_until_written())

    async def _retry_until_written(self) -> None:
        """While a queue waits on a failing store: write it again every ``retry_s``.

        Each try first checkpoints the write-ahead log into the database and truncates it:
        on a small disk the log itself can fill it (SQLite checkpoints on its own only past
        1,000 pages), and the space it gives back is what the queue needs.
        """
        loop = asyncio.get_running_loop()
        while self._pending and self.failing is not None:
            await asyncio.sleep(self.retry_s)
            with contextlib.suppress(sqlite3.Error):
                await loop.run_in_executor(self._executor, self._checkpoint)
            await self.flush()

    def _checkpoint(self) -> None:
        self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def _write(self, rows: list[tuple[str, int, str, float, str | None]]) -> None:
        """One transaction; a row's roster only where it changed (COALESCE keeps the old)."""
        with self._writer:
            self._writer.execute("BEGIN")
            self._writer.executemany(
                "INSERT INTO sessions(id, version, snapshot, updated, roster) VALUES (?,?,?,?,?) "
                "ON CONFLICT(id) DO UPDATE SET version=excluded.version, "
                "snapshot=excluded.snapshot, updated=excluded.updated, "
                "roster=COALESCE(excluded.roster, sessions.roster)",
                rows,
            )

    def _save_if_current(self, sid: str, version: int, data: str, roster: str | None) -> None:
        """Compare-and-set: write version ``version`` only over ``version - 1`` (or nothing)."""
        cur = self.db.execute(
            "INSERT INTO sessions(id, version, snapshot, updated, roster) VALUES (?,?,?,?,?) "
            "ON CONFLICT(id) DO UPDATE SET version=excluded.version, "
            "snapshot=excluded.snapshot, updated=excluded.updated, "
            "roster=COALESCE(excluded.roster, sessions.roster) "
            "WHERE sessions.version = excluded.version - 1",
            (sid, version, data, time.time(), roster),
        )
        if cur.rowcount != 1:
            raise StaleSessionError(f"session {sid}: changed by another process; resend")

    async def delete(self, sid: str) -> None:
        async with self._flush_lock:  # nothing in flight: the queue is all in _pending
            entry = self._pending.pop(sid, None)
            try:
                self.db.execute("DELETE FROM sessions WHERE id=?", (sid,))
            except sqlite3.Error as e:
                if entry is not None:
                    self._pending[sid] = entry
                raise StoreUnavailableError(f"session {sid}: not deleted: {e}") from None
            self._unwritten.discard(sid)

    async def expire(self, idle_s: float) -> list[str]:
        await self.flush()
        cutoff = time.time() - idle_s
        ids = [r[0] for r in self._read("SELECT id FROM sessions WHERE updated<?", (cutoff,))]
        try:
            self.db.execute("DELETE FROM sessions WHERE updated<?", (cutoff,))
        except sqlite3.Error as e:
            raise StoreUnavailableError(f"idle sessions not deleted: {e}") from None
        return ids

    async def count(self) -> int:
        """Sessions stored or queued (no flush: a create must not wait for the disk).

        May count a session twice for the instant its first snapshot is being committed.
        """
        stored = int(self._read("SELECT COUNT(*) FROM sessions")[0][0])
        return stored + len(self._unwritten)

    def lock(self, sid: str, timeout_s: float = 10.0) -> Any:
        """Orders this process's events on one session (no state kept for unused ids)."""
        return self._locks.hold(sid, timeout_s)

    async def close(self) -> None:
        """Write everything queued, trying for ``stop_wait_s`` while the disk refuses.

        Raises :class:`StoreUnavailableError` (after closing) when snapshots remain unwritten:
        a stop never reports clean while answered events are not on disk.
        """
        for task in (self._flusher, self._retry):
            if task is not None:
                task.cancel()
        deadline = time.monotonic() + self.stop_wait_s
        await self.flush()
        while self._pending and time.monotonic() < deadline:
            await asyncio.sleep(self.retry_s)
            await self.flush()
        lost = sorted(self._pending)
        self._executor.shutdown(wait=True)
        self._writer.close()
        self.db.close()
        if lost:
            raise StoreUnavailableError(
                f"{len(lost)} session(s) with answered events not written to {self.path} "
                f"({self.failing}): {', '.join(lost[:10])}{' ...' if len(lost) > 10 else ''}"
            )


# Writes a snapshot only over the version it was derived from (compare-and-set): a process
# whose cached session was stale (another process moved it on) cannot overwrite the newer
# state; it reloads and applies its event again. KEYS: version, snapshot, index, roster;
# ARGV: version, snapshot, ttl ms, deadline (ms since the epoch), session id, roster ('':
# unchanged, its expiry moved on).
_SAVE = """
local v = redis.call('get', KEYS[1])
local want = tonumber(ARGV[1]) - 1
if (v == false and want < 0) or (v ~= false and tonumber(v) == want) then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[3])
  redis.call('set', KEYS[2], ARGV[2], 'PX', ARGV[3])
  if ARGV[6] ~= '' then
    redis.call('set', KEYS[4], ARGV[6], 'PX', ARGV[3])
  else
    redis.call('pexpire', KEYS[4], ARGV[3])
  end
  redis.call('zadd', KEYS[3], ARGV[4], ARGV[5])
  return 1
end
return 0
"""

# A new session: refused if the id exists (-1) or the index holds ``limit`` live sessions
# (-2). The index (a sorted set scored by expiry deadline) counts sessions without a SCAN
# over every key. KEYS: version, snapshot, index, roster; ARGV: snapshot, ttl ms, now ms,
# limit, id, roster ('': none).
# The first write is a SET: Redis checks a script against ``maxmemory`` at its first write
# that may grow memory only while nothing has been written, so an index clean-up first
# would let every creation past a full Redis' limit (measured on Redis 7.0).
_CREATE = """
if redis.call('exists', KEYS[1]) == 1 then return -1 end
if redis.call('zcount', KEYS[3], '(' .. ARGV[3], '+inf') >= tonumber(ARGV[4]) then return -2 end
redis.call('set', KEYS[1], '0', 'PX', ARGV[2])
redis.call('set', KEYS[2], ARGV[1], 'PX', ARGV[2])
if ARGV[6] ~= '' then redis.call('set', KEYS[4], ARGV[6], 'PX', ARGV[2]) end
redis.call('zremrangebyscore', KEYS[3], '-inf', ARGV[3])
redis.call('zadd', KEYS[3], tonumber(ARGV[3]) + tonumber(ARGV[2]), ARGV[5])
return 1
"""


#: Redis' eviction policies that never drop a key to make room (all polylogue keys carry a
#: TTL, so the ``volatile-*`` policies can evict them too).
SAFE_EVICTION = "noeviction"


class RedisStore:
    """Snapshots in Redis: any number of service processes share sessions.

    Every call has a deadline (``timeout_s``: a stalled Redis is an error, not a hang) and any
    Redis failure (refused, reset, timed out, out of memory, read-only replica) is a
    :class:`StoreUnavailableError`, answered 503.
    """

    exclusive = False

    def __init__(
        self, url: str, idle_s: float, prefix: str = "polylogue:", timeout_s: float = 2.0
    ) -> None:
        try:
            import redis.asyncio as aioredis
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
        except ImportError as e:  # pragma: no cover - depends on the install
            raise SessionStoreError(
                "--state redis://... needs: pip install 'polylogue[serve]'"
            ) from e
        self.url = url
        # One retry at once (a dropped idle connection), no backoff: a Redis that is down
        # answers 503 within timeout_s instead of after seconds of client-side retries.
        self.r = aioredis.from_url(
            url,
            decode_responses=True,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 1),
        )
        self.prefix = prefix
        self.ttl_ms = max(int(idle_s * 1000), 1000)
        self._save = self.r.register_script(_SAVE)
        self._create = self.r.register_script(_CREATE)
        #: sorted set: session id -> expiry deadline (ms since the epoch), for count()
        self.index = f"{prefix}index"
        self._locks = KeyedLocks()
        #: the server's maxmemory-policy as read at start (None: not readable)
        self.eviction_policy: str | None = None

    def _k(self, sid: str, kind: str) -> str:
        return f"{self.prefix}{kind}:{sid}"

    def _keys(self, sid: str) -> list[str]:
        return [self._k(sid, "v"), self._k(sid, "s"), self.index, self._k(sid, "r")]

    @asynccontextmanager
    async def _calling(self, what: str) -> AsyncIterator[None]:
        """Redis failures as :class:`StoreUnavailableError`, naming the call and the cause."""
        from redis.exceptions import RedisError

        try:
            yield
        except (RedisError, OSError, TimeoutError) as e:
            raise StoreUnavailableError(
                f"Redis at {self.url}: {what} failed ({type(e).__name__}: {e})"
            ) from None

    async def create(
        self, sid: str, snapshot: dict[str, Any], limit: int, roster: str | None = None
    ) -> None:
        data = json.dumps(snapshot, separators=(",", ":"))
        now_ms = int(time.time() * 1000)
        args: list[str | int] = [data, self.ttl_ms, now_ms, limit, sid, roster or ""]
        async with self._calling("creating the session"):
            done = await self._create(keys=self._keys(sid), args=args)
        if done == -1:
            raise SessionExistsError(f"session {sid!r} already exists")
        if done == -2:
            raise SessionLimitError(f"too many sessions (limit {limit})")

    async def ping(self) -> None:
        """Reachable, and keeping its keys: a server that may evict them is refused.

        An eviction policy other than ``noeviction`` lets Redis drop a session it answered
        201 for as soon as memory runs short. Where ``CONFIG GET`` is not allowed (managed
        Redis), the policy cannot be read: a warning says so.
        """
        from redis.exceptions import ResponseError

        try:
            await self.r.ping()
        except Exception as e:
            raise SessionStoreError(f"cannot reach Redis at {self.url}: {e}") from None
        try:
            policy = (await self.r.config_get("maxmemory-policy")).get("maxmemory-policy")
        except ResponseError as e:
            logger.warning(
                "Redis at %s: cannot read maxmemory-policy (%s); if it is not 'noeviction', "
                "Redis may drop sessions under memory pressure (they then answer 410)",
                self.url,
                e,
            )
            return
        self.eviction_policy = policy
        if policy != SAFE_EVICTION:
            raise SessionStoreError(
                f"Redis at {self.url} has maxmemory-policy {policy!r}: it may delete sessions "
                "it has acknowledged when memory runs short. Set it to 'noeviction' "
                "(redis-cli CONFIG SET maxmemory-policy noeviction, and in redis.conf); "
                "a full Redis is then answered 503 and loses nothing"
            )

    async def health(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "redis", "state": "ok"}
        try:
            async with self._calling("ping"):
                await self.r.ping()
        except StoreUnavailableError as e:
            out.update(state="unavailable", error=str(e))
        return out

    async def version(self, sid: str) -> int | None:
        async with self._calling("reading the session version"):
            v = await self.r.get(self._k(sid, "v"))
        return None if v is None else int(v)

    async def load(self, sid: str) -> tuple[int, dict[str, Any]] | None:
        async with self._calling("reading the session"):
            v, snap, roster = await self.r.mget(
                self._k(sid, "v"), self._k(sid, "s"), self._k(sid, "r")
            )
            if v is None or snap is None:
                deadline = await self.r.zscore(self.index, sid)
            else:
                deadline = None
        if v is None or snap is None:
            if deadline is not None and deadline > time.time() * 1000:
                # Still indexed as live (not deleted, not expired): Redis dropped its keys.
                raise SessionGoneError(
                    f"session {sid!r} was lost by the store before its idle expiry (Redis "
                    "evicted its keys: maxmemory-policy must be 'noeviction'); start a new one"
                )
            return None
        return int(v), _with_roster(json.loads(snap), None if roster is None else str(roster))

    async def save(
        self,
        sid: str,
        version: int,
        snapshot: dict[str, Any],
        durable: bool = False,
        roster: str | None = None,
    ) -> None:
        """Compare-and-set: write ``version`` only over ``version - 1`` (one round trip).

        Always written before returning (``durable`` changes nothing).
        """
        data = json.dumps(snapshot, separators=(",", ":"))
        deadline = int(time.time() * 1000) + self.ttl_ms
        args: list[str | int] = [version, data, self.ttl_ms, deadline, sid, roster or ""]
        async with self._calling("writing the session"):
            done = await self._save(keys=self._keys(sid), args=args)
        if not done:
            raise StaleSessionError(f"session {sid}: changed by another process; resend")

    async def persist(self, sid: str) -> None:
        """Nothing to do: :meth:`save` wrote the snapshot before returning."""

    async def delete(self, sid: str) -> None:
        async with self._calling("deleting the session"), self.r.pipeline(transaction=True) as p:
            p.delete(self._k(sid, "s"), self._k(sid, "v"), self._k(sid, "r"))
            p.zrem(self.index, sid)
            await p.execute()

    async def expire(self, idle_s: float) -> list[str]:
        return []  # keys carry their own TTL

    async def count(self) -> int:
        """Live sessions, from the index (expired entries dropped first): no key SCAN."""
        async with self._calling("counting sessions"), self.r.pipeline(transaction=True) as p:
            p.zremrangebyscore(self.index, "-inf", int(time.time() * 1000))
            p.zcard(self.index)
            _, n = await p.execute()
        return int(n)

    def lock(self, sid: str, timeout_s: float = 10.0) -> Any:
        """Orders this process's events on a session; other processes are kept consistent by
        the compare-and-set write, not by a lock (a lock would cost two more round trips)."""
        return self._locks.hold(sid, timeout_s)

    async def close(self) -> None:
        await self.r.aclose()


def _with_roster(snapshot: dict[str, Any], roster: str | None) -> dict[str, Any]:
    if roster is not None:
        snapshot[ROSTER_KEY] = json.loads(roster)
    return snapshot


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
