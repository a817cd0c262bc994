"""The annotation web app (FastAPI): keyboard labelling, progress, resume, adjudication.

Access model
------------
* Each annotator has a secret key (``/a/<key>``); every API call names it, and the server
  answers with that annotator's own items and answers only. Gold labels, categories and other
  annotators' answers never leave the server through the annotator API.
* An adjudicator key (``/adjudicate/<key>``) shows the items without a majority together with
  the annotators' votes (that is the adjudicator's job), still without gold.
* The server binds to loopback by default. Any other host needs ``allow_remote=True`` *and* a
  server token; then every request must carry it (``Authorization: Bearer``, the
  ``polylogue_token`` cookie, or ``?token=`` once, which sets the cookie).

Every answer is written to SQLite before the response returns, so a reload or a crashed
browser loses nothing; several annotators (several browsers) can work at once.
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Awaitable, Callable
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

TOKEN_COOKIE = "polylogue_token"
_STATIC_PAGES = {
    "annotate": "annotate.html",
    "adjudicate": "adjudicate.html",
    "index": "index.html",
}


class AccessError(ValueError):
    """Refused server configuration (remote binding without flag or token)."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_binding(host: str, allow_remote: bool, token: str | None) -> None:
    """Refuse a non-loopback bind unless explicitly allowed *and* protected by a token."""
    if is_loopback(host):
        return
    if not allow_remote:
        raise AccessError(
            f"refusing to listen on {host!r}: annotators' data would be reachable from other "
            "machines. Pass --allow-remote together with --token to do this on purpose."
        )
    if not token or len(token) < 16:
        raise AccessError(
            f"listening on {host!r} needs a server token of at least 16 characters (--token); "
            "share it with the annotators together with their links"
        )


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


def create_app(
    store: AnnotationStore,
    token: str | None = None,
    media_root: str | Path | None = None,
) -> FastAPI:
    """The FastAPI application for one study database.

    ``media_root`` overrides the media folder recorded in each study (MeetingToM clips).
    """
    app = FastAPI(title="polylogue annotate", docs_url=None, redoc_url=None, openapi_url=None)
    pages = static_dir()
    media_base = Path(media_root).resolve() if media_root is not None else None

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

    def annotator(key: str, role: Role = Role.ANNOTATOR) -> Annotator:
        who = store.annotator_by_key(key)
        if who is None or who.role is not role:
            raise HTTPException(status_code=404, detail="unknown access key")
        return who

    def page(name: str) -> HTMLResponse:
        return HTMLResponse((pages / _STATIC_PAGES[name]).read_text(encoding="utf-8"))

    @app.get("/", response_class=HTMLResponse)
    def index() -> HTMLResponse:
        return page("index")

    @app.get("/a/{key}", response_class=HTMLResponse)
    def annotate_page(key: str) -> HTMLResponse:
        annotator(key)
        return page("annotate")

    @app.get("/adjudicate/{key}", response_class=HTMLResponse)
    def adjudicate_page(key: str) -> HTMLResponse:
        annotator(key, Role.ADJUDICATOR)
        return page("adjudicate")

    @app.get("/go")
    def go(key: str) -> RedirectResponse:
        """The index form posts a key here; send the person to their own view."""
        who = store.annotator_by_key(key.strip())
        if who is None:
            raise HTTPException(status_code=404, detail="unknown access key")
        target = "a" if who.role is Role.ANNOTATOR else "adjudicate"
        return RedirectResponse(f"/{target}/{key.strip()}", status_code=303)

    # ------------------------------------------------------------------ annotator API

    def progress_json(who: Annotator) -> dict[str, Any]:
        p = store.progress(who)
        return {"done": p.done, "total": p.total, "next_position": p.next_position}

    @app.get("/api/a/{key}/state")
    def state(key: str) -> dict[str, Any]:
        who = annotator(key)
        return {
            "annotator": who.name,
            "study": who.study.name,
            "kind": who.study.kind.value,
            "instructions": who.study.instructions,
            "progress": progress_json(who),
        }

    @app.get("/api/a/{key}/items/{position}")
    def item(key: str, position: int) -> dict[str, Any]:
        who = annotator(key)
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
        who = annotator(key)
        if not 0 <= position < len(who.order):
            raise HTTPException(status_code=404, detail=f"no item at position {position}")
        label = body.get("label")
        seconds = body.get("seconds")
        if not isinstance(label, str):
            raise HTTPException(status_code=422, detail="body needs a string 'label'")
        if seconds is not None and not isinstance(seconds, int | float):
            raise HTTPException(status_code=422, detail="'seconds' must be a number")
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
        return {"question_id": question_id, "label": saved.label, "progress": progress_json(who)}

    @app.get("/api/a/{key}/media/{position}/{question_id}")
    def media(key: str, position: int, question_id: str) -> FileResponse:
        who = annotator(key)
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

    # ------------------------------------------------------------------ adjudicator API

    @app.get("/api/adj/{key}/queue")
    def queue(key: str) -> dict[str, Any]:
        from polylogue.annotate.analysis import Source, study_resolutions

        who = annotator(key, Role.ADJUDICATOR)
        items = {it.item_id: it for it in store.items(who.study)}
        decided = {(d.item_id, d.question_id): d.label for d in store.adjudications(who.study)}
        open_items = []
        for r in study_resolutions(store, who.study):
            tie = r.source is Source.UNRESOLVED and len(r.votes) > 0
            if tie or (r.source is Source.ADJUDICATOR):
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
        who = annotator(key, Role.ADJUDICATOR)
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

    app.mount("/static", StaticFiles(directory=pages), name="static")
    return app


def serve(
    store_path: str | Path,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    allow_remote: bool = False,
    token: str | None = None,
    media_root: str | Path | None = None,
    log_level: str = "info",
) -> None:
    """Run the app with uvicorn (blocking)."""
    import uvicorn

    check_binding(host, allow_remote, token)
    store = AnnotationStore(store_path)
    app = create_app(store, token=token, media_root=media_root)
    # No access log: request lines would write annotators' keys into the terminal and logs.
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)


__all__ = ["AccessError", "check_binding", "create_app", "is_loopback", "serve", "static_dir"]
