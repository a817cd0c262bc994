"""The one run-folder schema and resumable run loop (evaluation, MeetingToM, distillation).

A run folder is named by a key hashing everything that changes the answers, and holds:

* ``manifest.json``: :func:`new_manifest`'s common fields (``kind``, ``run_key``, ``created``,
  ``versions``, ``git_commit``, ``command``, ``status``) plus the runner's own; replaced
  atomically, and kept (with ``resumed_at``) when the same key runs again;
* an append-only JSONL file (``predictions.jsonl``; distillation: ``reasoning.jsonl``): one
  record per finished item, written and flushed as soon as it is known and fsynced per chunk
  (:class:`JsonlAppender`). A torn last line (SIGKILL mid-write) is cut off on resume
  (:func:`read_records`), and items already in the file are skipped (:func:`run_chunks`).
"""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Generic, TypeVar

from polylogue.errors import PolylogueInputError, RunStopped
from polylogue.jsonio import JsonInputError, loads_json


class RunFileError(PolylogueInputError):
    """A predictions file was edited or damaged (a malformed line before the last one)."""


class RunFolderBusy(RunStopped):
    """Another process is running the same run (same folder) right now."""


@contextmanager
def lock_run_folder(folder: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on a run folder while a run works in it.

    Two identical runs at once would each do (and pay for) every item and write it twice; the
    second one therefore stops at once with :class:`RunFolderBusy` (exit status 1) and can be
    rerun when the first is done. The lock is an advisory ``flock`` on the folder itself (no
    lock file: a complete run in a read-only folder can still be opened), released by the
    kernel when the holder exits or is killed. Where ``fcntl`` does not exist (Windows) runs
    are not locked.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunFolderBusy(
                f"{folder} is in use by another polylogue run of the same setup; wait for it to "
                "finish (or stop it), then rerun this command to resume"
            ) from None
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def canonical_json(obj: Any) -> str:
    """Deterministic JSON for hashing options into run keys."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def read_records(
    path: str | Path, key: str | None = "point_id", repair: bool = False
) -> list[dict[str, Any]]:
    """Records of an append-only JSONL file, first occurrence per ``key`` (all when None).

    A last line without its newline is the trace of a killed write: ignored, and cut off when
    ``repair`` is set. A malformed line elsewhere means the file was edited or damaged, which
    is reported with its line number rather than guessed around.
    """
    p = Path(path)
    if not p.exists():
        return []
    data = p.read_bytes()
    complete_end = data.rfind(b"\n") + 1
    if complete_end < len(data) and repair:
        with open(p, "r+b") as f:
            f.truncate(complete_end)
            f.flush()
            os.fsync(f.fileno())
    records: list[dict[str, Any]] = []
    seen: set[str] = set()
    for lineno, line in enumerate(data[:complete_end].splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = loads_json(line, p, f"line {lineno}")
            rid = "" if key is None else str(rec[key])
        except JsonInputError as exc:
            raise RunFileError(f"{exc}") from None
        except (KeyError, TypeError) as exc:
            raise RunFileError(f"{p}:line {lineno}: malformed prediction record: {exc!r}") from exc
        if key is None:
            records.append(rec)
            continue
        if rid in seen:
            continue
        seen.add(rid)
        records.append(rec)
    return records


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON so a reader never sees half a file (temp file + fsync + rename)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, ensure_ascii=False, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # A full disk must not leave a stray half-written .tmp next to the manifest.
        tmp.unlink(missing_ok=True)
        raise


def overwrite_json_in_place(path: Path, obj: Any) -> None:
    """Rewrite an existing JSON file over its own blocks (no new file, no rename).

    The fallback when :func:`write_json_atomic` fails on a full disk: a small manifest fits in
    the blocks it already has, so its status can still be set. Not atomic: a crash in the
    middle leaves a torn file, which :func:`resume_manifest` treats as no manifest.
    """
    text = json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n"
    with open(path, "r+", encoding="utf-8") as f:
        f.write(text)
        f.truncate()
        f.flush()
        os.fsync(f.fileno())


def write_json_if_changed(path: Path, obj: Any) -> bool:
    """:func:`write_json_atomic` unless ``path`` already holds the same JSON (then no write).

    Re-scoring a complete run changes nothing, so it works in a read-only folder.
    """
    new = json.loads(json.dumps(obj, ensure_ascii=False, default=str))
    try:
        if json.loads(path.read_text(encoding="utf-8")) == new:
            return False
    except (OSError, ValueError):
        pass
    write_json_atomic(path, obj)
    return True


def git_commit() -> str | None:
    """The polylogue checkout's commit, when it runs from one."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def versions(packages: Iterable[str] = ()) -> dict[str, str]:
    """Python, platform and installed versions of polylogue and ``packages``."""
    from importlib import metadata

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for pkg in ("polylogue", *packages):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    return out


# ----------------------------------------------------------------------------- manifest


def utc_now() -> str:
    import datetime as dt

    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


REDACTED = "[REDACTED]"

#: Environment variables whose names contain one of these hold secrets (OPENAI_API_KEY,
#: HF_TOKEN...): their values never enter a manifest's saved command line.
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
#: ``-O NAME=VALUE`` options whose NAME looks secret have their VALUE replaced.
_SECRET_OPTION = re.compile(
    r"^(-O|--option=)?([^=\s]*(?:key|token|secret|passw|auth)[^=\s]*)=(.*)$", re.IGNORECASE
)
#: ``scheme://user:password@host`` in a URL.
_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


def secret_values(environ: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> list[str]:
    """Values of secret-named environment variables (8+ characters) and of ``extra`` names."""
    env = os.environ if environ is None else environ
    names = {n for n in env if _SECRET_NAME.search(n)} | set(extra)
    return sorted({env[n] for n in names if len(env.get(n, "")) >= 8}, key=len, reverse=True)


def redact_argv(argv: Sequence[str], secrets: Iterable[str] = ()) -> list[str]:
    """A command line safe to store: secret ``-O`` values, URL passwords and ``secrets`` out."""
    secrets = [x for x in secrets if x]
    out: list[str] = []
    for i, arg in enumerate(argv):
        follows_option = i > 0 and argv[i - 1] in ("-O", "--option")
        m = _SECRET_OPTION.match(arg)
        if m and (follows_option or m.group(1)):
            arg = f"{m.group(1) or ''}{m.group(2)}={REDACTED}"
        arg = _URL_USERINFO.sub(f"{REDACTED}@", arg)
        for secret in secrets:
            arg = arg.replace(secret, REDACTED)
        out.append(arg)
    return out


#: A token that is (or ends in) an absolute path: ``/x``, ``--opt=/x``, ``NAME=/x``, ``hf:/x``.
_PATH_TOKEN = re.compile(r"^(?P<head>(?:-[\w-]*=|[A-Za-z_][\w.]*[=:])?)(?P<path>/.*)$")
_INTERPRETER = re.compile(r"^python(?:\d+(?:\.\d+)?)?$")


def portable_command(
    argv: Sequence[str],
    cwd: str | Path | None = None,
    placeholders: Mapping[str, str] | None = None,
) -> str:
    """``argv`` as a user types it, for a report: no path of the machine that ran it.

    The interpreter becomes ``python`` and an installed script its bare name (``polylogue``);
    a path under ``cwd`` becomes relative to it; a path named in ``placeholders`` (a folder:
    its own files too) becomes that placeholder; any other absolute path becomes a placeholder
    named for its option (``--runs /tmp/x`` → ``RUNS``; ``PATH`` without an option).
    """
    base = Path(os.getcwd() if cwd is None else cwd).resolve()
    named = sorted(
        ((str(Path(k)), v) for k, v in (placeholders or {}).items()), key=lambda kv: -len(kv[0])
    )
    out: list[str] = []
    for i, arg in enumerate(argv):
        m = _PATH_TOKEN.match(arg)
        if i == 0 and "/" in arg:
            name = Path(arg).name
            out.append("python" if _INTERPRETER.match(name) else name)
            continue
        if m is None:
            out.append(arg)
            continue
        head, path = m.group("head"), m.group("path")
        out.append(head + _portable_path(path, base, named, _option_of(argv, i, head)))
    return shlex.join(out)


def portable_path(
    path: str | Path, cwd: str | Path | None = None, placeholder: str = "PATH"
) -> str:
    """``path`` relative to ``cwd`` (default: the working directory) when under it, else
    ``placeholder``: a path for a report, never one of the machine that wrote it."""
    if not Path(path).is_absolute():
        return str(path)
    base = Path(os.getcwd() if cwd is None else cwd).resolve()
    return _portable_path(str(path), base, (), placeholder)


def _option_of(argv: Sequence[str], i: int, head: str) -> str:
    """The option a path argument belongs to: ``--runs`` for ``--runs X`` or ``--runs=X``."""
    if head.startswith("-"):
        return head.rstrip("=")
    if head.endswith(":"):
        return ""  # a model spec's scheme (hf:PATH): the path is the placeholder
    if head:
        return head.rstrip("=")
    if i > 0 and argv[i - 1].startswith("-") and "=" not in argv[i - 1]:
        return argv[i - 1]
    return ""


def _portable_path(path: str, base: Path, named: Sequence[tuple[str, str]], option: str) -> str:
    for folder, placeholder in named:
        if path == folder or path.startswith(folder.rstrip("/") + "/"):
            return placeholder + path[len(folder.rstrip("/")) :]
    try:
        rel = Path(path).resolve().relative_to(base)
    except ValueError:
        word = re.sub(r"[^A-Za-z0-9]+", "_", option.lstrip("-")).strip("_").upper()
        return word or "PATH"
    return str(rel) if str(rel) != "." else "."


def install_independent(value: Any) -> Any:
    """``value`` (a predictor's or generator's description) with every path inside this
    installation written relative to it: a file of the polylogue package as
    ``polylogue/...``, one of an installed package as ``site-packages/...``. A run key hashes
    this, so the same options give the same run folder in any checkout or environment (the
    shipped model's own folder is otherwise part of the key)."""
    if isinstance(value, Mapping):
        return {k: install_independent(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [install_independent(v) for v in value]
    if isinstance(value, str) and value.startswith("/"):
        real = os.path.realpath(value)
        for root, name in _install_roots():
            if real == root or real.startswith(root + "/"):
                return name + real[len(root) :]
    return value


def _install_roots() -> list[tuple[str, str]]:
    import sysconfig

    import polylogue

    roots = [(str(Path(polylogue.__file__).resolve().parent), "polylogue")]
    for key in ("purelib", "platlib"):
        roots.append((str(Path(sysconfig.get_paths()[key]).resolve()), "site-packages"))
    return sorted(set(roots), key=lambda r: -len(r[0]))


def new_manifest(
    kind: str, run_key: str, packages: Iterable[str] = (), secret_env: Iterable[str] = ()
) -> dict[str, Any]:
    """The fields every run manifest starts with; a runner adds its own.

    ``command`` is the command line with secrets removed (:func:`redact_argv`); ``secret_env``
    names variables holding secrets beyond those whose names say so (``--api-key-env MYVAR``).
    """
    return {
        "kind": kind,
        "run_key": run_key,
        "created": utc_now(),
        "versions": versions(packages),
        "git_commit": git_commit(),
        "command": redact_argv(sys.argv, secret_values(extra=secret_env)),
        "status": "running",
    }


def resume_manifest(path: Path, run_key: str) -> dict[str, Any] | None:
    """The manifest of an earlier session of the same run (``resumed_at`` extended), else None."""
    if not path.exists():
        return None
    try:
        old = loads_json(path.read_bytes(), path)
    except (JsonInputError, UnicodeDecodeError):
        return None  # a torn manifest (killed mid-write): start it afresh
    if not isinstance(old, dict) or old.get("run_key") != run_key:
        return None
    old["resumed_at"] = [*old.get("resumed_at", []), utc_now()]
    return old


# ----------------------------------------------------------------------------- append + loop


class JsonlAppender:
    """Append records to a JSONL file: each is flushed to the OS at once, ``sync`` fsyncs."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._f: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close)

    def append(self, record: Any) -> None:
        self._f.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._f.flush()

    def sync(self) -> None:
        os.fsync(self._f.fileno())

    def close(self) -> None:
        if not self._f.closed:
            self.sync()
            self._f.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


T = TypeVar("T")


class ChunkFailed(Exception):
    """Raised by a chunk function that finished only some items: those are kept, then re-raised."""

    def __init__(self, records: Sequence[Any], error: BaseException) -> None:
        super().__init__(str(error))
        self.records = list(records)
        self.error = error


@dataclass
class LoopResult(Generic[T]):
    n_new: int
    todo: list[T]


def run_chunks(
    items: Sequence[T],
    done: set[str],
    item_id: Callable[[T], str],
    process: Callable[[Sequence[T]], Sequence[Any]],
    out: JsonlAppender,
    *,
    chunk_size: int = 1,
    on_chunk: Callable[[int, int], None] | None = None,
) -> LoopResult[T]:
    """The resumable run loop: process the items not in ``done``, chunk by chunk.

    ``process`` turns a chunk into records, which are appended (and fsynced per chunk) before
    the next chunk starts, so a kill loses at most the chunk in flight. A ``process`` that
    finished part of a chunk raises :class:`ChunkFailed`: its records are kept and the error
    is re-raised. ``on_chunk(n_new, n_todo)`` reports progress.
    """
    todo = [it for it in items if item_id(it) not in done]
    n_new = 0
    for start in range(0, len(todo), max(1, chunk_size)):
        chunk = todo[start : start + max(1, chunk_size)]
        error: BaseException | None = None
        try:
            records = list(process(chunk))
        except ChunkFailed as exc:
            records, error = exc.records, exc.error
        for rec in records:
            out.append(rec)
        out.sync()
        n_new += len(records)
        if on_chunk is not None:
            on_chunk(n_new, len(todo))
        if error is not None:
            raise error
    return LoopResult(n_new, todo)
