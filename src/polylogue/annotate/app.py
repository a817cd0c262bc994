"""The annotation web app (FastAPI): keyboard labelling, progress, resume, adjudication.

Access model
------------
* Each annotator has a secret key (``/a/<key>``); every API call names it, and the server
  answers with that annotator's own items and answers only. Gold labels, categories and other
  annotators' answers never leave the server through the annotator API.
* An adjudicator key (``/adjudicate/<key>``) shows the items without a majority together with
  the annotators' votes (that is the adjudicator's job), still without gold.
* The server binds to loopback by default. Any other host needs ``allow_remote=True`` *and* a
  random-looking server token (:func:`token_problem`); then every request must carry it
  (``Authorization: Bearer``, the ``polylogue_token`` cookie, or ``?token=`` once, which sets
  the cookie).
* :func:`serve_study` only answers requests whose ``Host`` header names the bound address (or, on
  loopback, ``localhost``/``127.0.0.1``/``[::1]``) and port, so a web page cannot reach the
  app through a DNS-rebinding name.
* Request bodies over :data:`MAX_BODY_BYTES` are refused with 413 before they are parsed.

Every answer is written to SQLite before the response returns, so a reload or a crashed
browser loses nothing; several annotators (several browsers) can work at once.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable, Collection
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import Body, FastAPI, HTTPException, Request, Response
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from polylogue.annotate.store import (
    AnnotationStore,
    Annotator,
    Role,
    StoreError,
    StudyItem,
)
from polylogue.errors import PolylogueInputError
from polylogue.serve.guard import (  # one home for the checks both local services make
    ListenError,
    bound_hosts,
    host_allowed,
    is_loopback,
    listening_socket,
    send_json_body,
    token_problem,
)

TOKEN_COOKIE = "polylogue_token"
#: Largest request body read: answers and decisions are a few hundred bytes.
MAX_BODY_BYTES = 64 * 1024
#: Largest time an annotator may report for one answer (a day; the UI sends seconds).
MAX_ANSWER_SECONDS = 86_400.0
_STATIC_PAGES = {
    "annotate": "annotate.html",
    "adjudicate": "adjudicate.html",
    "index": "index.html",
}


class AccessError(PolylogueInputError):
    """Refused server configuration (remote binding without flag or token)."""


def check_binding(host: str, allow_remote: bool, token: str | None) -> None:
    """Refuse a non-loopback bind unless explicitly allowed *and* protected by a token."""
    if is_loopback(host):
        return
    if not allow_remote:
        raise AccessError(
            f"refusing to listen on {host!r}: annotators' data would be reachable from other "
            "machines. Pass --allow-remote together with --token to do this on purpose."
        )
    problem = "is missing" if not token else token_problem(token)
    if problem:
        raise AccessError(
            f"listening on {host!r} needs a random server token (--token); yours {problem}. "
            f"Use for example {secrets.token_urlsafe(24)} and share it with the annotators "
            "together with their links"
        )


class _Guard:
    """Raw ASGI layer in front of the app: Host check, then a body-size cap while reading."""

    def __init__(self, app: Any, allowed_hosts: Collection[str] | None, port: int | None) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts
        self.port = port

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self.allowed_hosts and not host_allowed(
            headers.get("host", ""), self.allowed_hosts, self.port
        ):
            await _send_json(send, 421, "request for another host name")
            return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            await _send_json(send, 413, f"request body over {MAX_BODY_BYTES} bytes")
            return
        received = 0
        too_large = False
        started = False

        async def capped_receive() -> Any:
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > MAX_BODY_BYTES:
                    too_large = True  # stop reading: pretend the client left
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Any) -> None:
            nonlocal started
            if too_large:
                if not started:
                    started = True
                    await _send_json(send, 413, f"request body over {MAX_BODY_BYTES} bytes")
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, capped_receive, guarded_send)
        if too_large and not started:
            await _send_json(send, 413, f"request body over {MAX_BODY_BYTES} bytes")


async def _send_json(send: Any, status: int, detail: str) -> None:
    await send_json_body(send, status, json.dumps({"detail": detail}).encode())


def static_dir() -> Path:
    return Path(str(resources.files("polylogue.annotate") / "static"))


def item_view_json(
    item: StudyItem, position: int, total: int, answers: dict[str, str]
) -> dict[str, Any]:
    """What the annotator API sends for one item: payload, questions and *own* answers."""
    return {
        "position": position,
        "total": total,
        "questions": [q.to_dict() for q in item.questions],
        "payload": item.payload,
        "answers": answers,
    }


def _annotator(store: AnnotationStore, key: str, role: Role = Role.ANNOTATOR) -> Annotator:
    """The person behind an access key, or 404 (also for a key of the other role)."""
    who = store.annotator_by_key(key)
    if who is None or who.role is not role:
        raise HTTPException(status_code=404, detail="unknown access key")
    return who


def _add_token_check(app: FastAPI, token: str | None) -> None:
    """Every request shows the server token (header, cookie or ``?token=``); safe headers."""

    @app.middleware("http")
    async def guard(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        set_cookie = False
        if token is not None:
            offered = (
                request.headers.get("authorization", "").removeprefix("Bearer ").strip()
                or request.cookies.get(TOKEN_COOKIE, "")
                or request.query_params.get("token", "")
            )
            if not secrets.compare_digest(offered.encode(), token.encode()):
                return JSONResponse({"detail": "missing or wrong server token"}, status_code=401)
            set_cookie = request.query_params.get("token") is not None
        response = await call_next(request)
        # Keys travel in URLs: keep them out of caches and Referer headers.
        response.headers["Cache-Control"] = "no-store"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; media-src 'self'; img-src 'self' data:; style-src 'self'"
        )
        if set_cookie and token is not None:
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
        return response


def _add_pages(app: FastAPI, store: AnnotationStore, pages: Path) -> None:
    """The HTML pages: index, annotator view, adjudicator view, and the key form's redirect."""

    def page(name: str) -> HTMLResponse:
        return HTMLResponse((pages / _STATIC_PAGES[name]).read_text(encoding="utf-8"))

    @app.get("/", response_class=HTMLResponse)
    def index() -> HTMLResponse:
        return page("index")

    @app.get("/a/{key}", response_class=HTMLResponse)
    def annotate_page(key: str) -> HTMLResponse:
        _annotator(store, key)
        return page("annotate")

    @app.get("/adjudicate/{key}", response_class=HTMLResponse)
    def adjudicate_page(key: str) -> HTMLResponse:
        _annotator(store, key, Role.ADJUDICATOR)
        return page("adjudicate")

    @app.get("/go")
    def go(key: str) -> RedirectResponse:
        """The index form posts a key here; send the person to their own view."""
        who = store.annotator_by_key(key.strip())
        if who is None:
            raise HTTPException(status_code=404, detail="unknown access key")
        target = "a" if who.role is Role.ANNOTATOR else "adjudicate"
        return RedirectResponse(f"/{target}/{key.strip()}", status_code=303)


def _progress_json(store: AnnotationStore, who: Annotator) -> dict[str, Any]:
    p = store.progress(who)
    return {"done": p.done, "total": p.total, "next_position": p.next_position}


def _add_annotator_api(app: FastAPI, store: AnnotationStore, media_base: Path | None) -> None:
    """State, items, answers and media of one annotator (``/api/a/{key}/...``)."""

    @app.get("/api/a/{key}/state")
    def state(key: str) -> dict[str, Any]:
        who = _annotator(store, key)
        return {
            "annotator": who.name,
            "study": who.study.name,
            "kind": who.study.kind.value,
            "instructions": who.study.instructions,
            "progress": _progress_json(store, who),
        }

    @app.get("/api/a/{key}/items/{position}")
    def item(key: str, position: int) -> dict[str, Any]:
        who = _annotator(store, key)
        try:
            view = store.item_view(who, position)
        except StoreError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc
        own = {a.question_id: a.label for a in store.own_answers(who, view.item_id)}
        return item_view_json(view, position, len(who.order), own)

    @app.put("/api/a/{key}/items/{position}/answers/{question_id}")
    def answer(
        key: str,
        position: int,
        question_id: str,
        body: dict[str, Any] = Body(...),
    ) -> dict[str, Any]:
        who = _annotator(store, key)
        if not 0 <= position < len(who.order):
            raise HTTPException(status_code=404, detail=f"no item at position {position}")
        label = body.get("label")
        seconds = body.get("seconds")
        if not isinstance(label, str):
            raise HTTPException(status_code=422, detail="body needs a string 'label'")
        if seconds is not None and (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not 0 <= seconds <= MAX_ANSWER_SECONDS  # also refuses NaN
        ):
            raise HTTPException(
                status_code=422,
                detail=f"'seconds' must be a number from 0 to {MAX_ANSWER_SECONDS:.0f}",
            )
        try:
            saved = store.save_answer(
                who,
                who.order[position],
                question_id,
                label,
                None if seconds is None else float(seconds),
            )
        except StoreError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from exc
        return {
            "question_id": question_id,
            "label": saved.label,
            "progress": _progress_json(store, who),
        }

    @app.get("/api/a/{key}/media/{position}/{question_id}")
    def media(key: str, position: int, question_id: str) -> FileResponse:
        who = _annotator(store, key)
        try:
            view = store.item_view(who, position)
        except StoreError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc
        rel = (view.payload.get("media") or {}).get(question_id)
        recorded = who.study.source.get("media_root")
        base = media_base or (Path(recorded).resolve() if recorded else None)
        if base is None or not rel:
            raise HTTPException(status_code=404, detail="no media for this question")
        path = (base / rel).resolve()
        if not path.is_relative_to(base) or not path.is_file():
            raise HTTPException(status_code=404, detail="media file not found")
        return FileResponse(path)


def _add_adjudicator_api(app: FastAPI, store: AnnotationStore) -> None:
    """The adjudicator's queue of ties and their decisions (``/api/adj/{key}/...``)."""

    @app.get("/api/adj/{key}/queue")
    def queue(key: str) -> dict[str, Any]:
        from polylogue.annotate.analysis import LabelSource, study_resolutions

        who = _annotator(store, key, Role.ADJUDICATOR)
        items = {it.item_id: it for it in store.items(who.study)}
        decided = {(d.item_id, d.question_id): d.label for d in store.adjudications(who.study)}
        open_items = []
        for r in study_resolutions(store, who.study):
            tie = r.source is LabelSource.UNRESOLVED and len(r.votes) > 0
            if tie or (r.source is LabelSource.ADJUDICATOR):
                it = items[r.item_id]
                open_items.append(
                    {
                        "item_id": r.item_id,
                        "question": it.question(r.question_id).to_dict(),
                        "payload": it.payload,  # no gold, no category
                        "votes": r.votes,
                        "decision": decided.get((r.item_id, r.question_id)),
                    }
                )
        return {"adjudicator": who.name, "study": who.study.name, "items": open_items}

    @app.post("/api/adj/{key}/decisions")
    def decide(
        key: str,
        body: dict[str, Any] = Body(...),
    ) -> dict[str, Any]:
        who = _annotator(store, key, Role.ADJUDICATOR)
        try:
            d = store.save_adjudication(
                who.study,
                str(body.get("item_id")),
                str(body.get("question_id")),
                str(body.get("label")),
                who.name,
                str(body.get("note") or ""),
            )
        except StoreError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from exc
        return {"item_id": d.item_id, "question_id": d.question_id, "label": d.label}


def create_study_app(
    store: AnnotationStore,
    token: str | None = None,
    media_root: str | Path | None = None,
    allowed_hosts: Collection[str] | None = None,
    port: int | None = None,
) -> FastAPI:
    """The FastAPI application for one study database.

    ``media_root`` overrides the media folder recorded in each study (MeetingToM clips).
    ``allowed_hosts`` (and ``port``) restrict the ``Host`` header (see :func:`bound_hosts`);
    ``None`` accepts any, as in-process test clients need.
    """
    app = FastAPI(title="polylogue annotate", docs_url=None, redoc_url=None, openapi_url=None)
    pages = static_dir()
    media_base = Path(media_root).resolve() if media_root is not None else None

    _add_token_check(app, token)
    _add_pages(app, store, pages)
    _add_annotator_api(app, store, media_base)
    _add_adjudicator_api(app, store)
    app.mount("/static", StaticFiles(directory=pages), name="static")
    # Outermost: a wrong Host or an oversized body is refused before the token check or parsing.
    app.add_middleware(_Guard, allowed_hosts=allowed_hosts, port=port)
    return app


def serve_study(
    store_path: str | Path,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    allow_remote: bool = False,
    token: str | None = None,
    media_root: str | Path | None = None,
    log_level: str = "info",
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """Run the app with uvicorn (blocking).

    The socket is bound first, so ``on_listening`` gets the real base URL (``--port 0`` picks a
    free port) and a port in use is a clear error before anything starts.
    """
    import socket

    import uvicorn

    check_binding(host, allow_remote, token)
    store = AnnotationStore(store_path)
    sock = listening_socket(host, port)
    real_port = int(sock.getsockname()[1])
    app = create_study_app(
        store, token=token, media_root=media_root, allowed_hosts=bound_hosts(host), port=real_port
    )
    if on_listening is not None:
        shown = f"[{host}]" if sock.family == socket.AF_INET6 else host
        on_listening(f"http://{shown}:{real_port}/")
    # No access log: request lines would write annotators' keys into the terminal and logs.
    config = uvicorn.Config(app, log_level=log_level, access_log=False)
    with sock:
        uvicorn.Server(config).run(sockets=[sock])


__all__ = [
    "MAX_BODY_BYTES",
    "AccessError",
    "ListenError",
    "bound_hosts",
    "check_binding",
    "create_study_app",
    "host_allowed",
    "is_loopback",
    "listening_socket",
    "serve_study",
    "static_dir",
    "token_problem",
]
