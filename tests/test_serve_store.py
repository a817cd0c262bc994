"""The SQLite session store's write-behind: reads see queued snapshots, a flush writes them in
one transaction, a normal close writes everything, ``flush_s=0`` writes through."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from polylogue.serve.store import SQLiteStore


def _on_disk(path: Path) -> dict[str, int]:
    """What another reader of the file sees (committed rows only)."""
    with sqlite3.connect(path) as db:
        return dict(db.execute("SELECT id, version FROM sessions").fetchall())


def test_write_behind_is_read_back_and_written_on_flush_and_close(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"

    async def first_process() -> None:
        store = SQLiteStore(path, flush_s=3600)  # nothing flushes on its own in this test
        await store.save("a", 0, {"n": 0})
        await store.save("a", 1, {"n": 1})
        await store.save("b", 0, {"n": 0})
        assert _on_disk(path) == {}  # queued, not written yet
        assert await store.load("a") == (1, {"n": 1})  # ... but this process reads it
        assert await store.version("b") == 0
        assert await store.count() == 2  # queued sessions count
        await store.flush()
        assert _on_disk(path) == {"a": 1, "b": 0}  # one row per session: the newest
        assert await store.count() == 2
        await store.save("a", 2, {"n": 2})
        await store.save("c", 0, {"n": 0})
        await store.delete("c")  # deleting a queued session leaves nothing behind
        await store.close()  # a normal stop writes everything queued

    async def second_process() -> None:
        store = SQLiteStore(path, flush_s=3600)
        assert await store.load("a") == (2, {"n": 2})
        assert await store.load("c") is None
        await store.close()

    asyncio.run(first_process())
    assert _on_disk(path) == {"a": 2, "b": 0}
    asyncio.run(second_process())


def test_flush_interval_zero_writes_before_answering(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"

    async def scenario() -> None:
        store = SQLiteStore(path, flush_s=0)
        await store.save("a", 0, {"n": 0})
        assert _on_disk(path) == {"a": 0}
        await store.save("a", 1, {"n": 1})
        assert _on_disk(path) == {"a": 1}
        await store.close()

    asyncio.run(scenario())


def test_background_flush_writes_without_a_close(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"

    async def scenario() -> None:
        store = SQLiteStore(path, flush_s=0.01)
        for v in range(5):
            await store.save("a", v, {"n": v})
        while _on_disk(path) != {"a": 4}:  # the flush task runs on this loop, unprompted
            await asyncio.sleep(0.01)
        await store.close()

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_shared_file_refuses_a_stale_write(tmp_path: Path) -> None:
    """``--workers``: two processes on one file; a write over a moved-on version is refused."""
    import pytest

    from polylogue.serve.store import StaleSessionError

    path = tmp_path / "s.sqlite"

    async def scenario() -> None:
        a = SQLiteStore(path, shared=True)
        b = SQLiteStore(path, shared=True)
        assert not a.exclusive
        await a.save("s", 0, {"n": 0})
        assert _on_disk(path) == {"s": 0}  # written before answering
        await b.save("s", 1, {"n": 1})  # b continues from version 0
        with pytest.raises(StaleSessionError):
            await a.save("s", 1, {"n": "stale"})  # a derived it from version 0 too
        with pytest.raises(StaleSessionError):
            await a.save("s", 0, {"n": "again"})  # creating an existing session
        assert await a.load("s") == (1, {"n": 1})
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_create_is_written_at_once_and_refuses_taken_ids_and_the_limit(tmp_path: Path) -> None:
    import pytest

    from polylogue.serve.store import SessionExistsError, SessionLimitError

    path = tmp_path / "s.sqlite"

    async def scenario() -> None:
        store = SQLiteStore(path, flush_s=3600)  # write-behind never flushes by itself here
        await store.create("a", {"n": 0}, limit=2)
        assert _on_disk(path) == {"a": 0}  # on disk before create() returned
        with pytest.raises(SessionExistsError):
            await store.create("a", {"n": "again"}, limit=2)
        await store.save("a", 1, {"n": 1})  # events stay written behind
        assert _on_disk(path) == {"a": 0}
        await store.create("b", {"n": 0}, limit=2)
        with pytest.raises(SessionLimitError):
            await store.create("c", {"n": 0}, limit=2)
        await store.delete("b")
        await store.create("c", {"n": 0}, limit=2)
        assert await store.load("a") == (1, {"n": 1})
        shared = SQLiteStore(path, shared=True)  # --workers: the same rules in one statement
        with pytest.raises(SessionExistsError):
            await shared.create("c", {"n": 0}, limit=5)
        with pytest.raises(SessionLimitError):
            await shared.create("d", {"n": 0}, limit=2)
        await shared.close()
        await store.close()

    asyncio.run(scenario())


def test_locking_unknown_sessions_leaves_nothing_behind(tmp_path: Path) -> None:
    """Issue 29 item 13: a lock per unknown id (every 404) grew memory without bound."""
    from polylogue.engine.model import load_model
    from polylogue.serve.app import Sessions
    from polylogue.serve.metrics import Metrics

    async def scenario() -> None:
        store = SQLiteStore(tmp_path / "s.sqlite")
        sessions = Sessions(store, load_model(), Metrics())
        for i in range(2000):
            event = {"type": "utterance", "speaker": "A", "text": "hi"}
            result = await sessions.apply(f"unknown-{i}", event)
            assert result["ok"] is False and "no session" in result["error"]
        assert len(store._locks) == 0
        async with store.lock("x"), store.lock("y"):
            assert len(store._locks) == 2
        assert len(store._locks) == 0
        await store.close()

    asyncio.run(scenario())
