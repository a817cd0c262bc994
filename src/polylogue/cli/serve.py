"""``polylogue serve``: the live turn-taking service (see polylogue.serve.app)."""

from __future__ import annotations

from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)


def serve(
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="POLYLOGUE_SERVE_TOKEN",
            help="Bearer token required on every route and socket (needed off loopback).",
        ),
    ] = None,
    state: Annotated[
        str | None,
        typer.Option(
            help="Session state: a SQLite file (default ~/.local/state/polylogue/"
            "sessions.sqlite), sqlite:///path, or redis://host:port/db to share sessions "
            "between processes."
        ),
    ] = None,
    idle_ttl: Annotated[
        float, typer.Option(help="Seconds before an idle session expires.")
    ] = 1800.0,
    max_sessions: Annotated[int, typer.Option(help="Most sessions held at once.")] = 10_000,
    sweep_interval: Annotated[
        float, typer.Option(help="Seconds between sweeps for idle sessions.")
    ] = 30.0,
    flush_interval: Annotated[
        float,
        typer.Option(
            help="SQLite state: seconds between batched snapshot writes (a crash loses at "
            "most this much; a normal stop writes everything). 0 writes before each answer."
        ),
    ] = 0.05,
    trace: Annotated[
        bool,
        typer.Option(
            help="Add per-step timestamps to every stream result (latency breakdown of "
            "benchmarks/serve_load.py)."
        ),
    ] = False,
) -> None:
    """Serve turn-taking decisions to live agents over WebSocket and HTTP."""
    from polylogue.extras import require_extra

    require_extra("serve", "starlette", "uvicorn", "websockets", what="polylogue serve")
    import uvicorn

    from polylogue.serve.app import check_bind, create_app
    from polylogue.serve.store import open_store

    check_bind(host, token)
    store = open_store(state, idle_ttl, flush_interval)
    if hasattr(store, "ping"):
        import asyncio

        asyncio.run(store.ping())  # fail now, with the URL, not at the first event
        store = open_store(
            state, idle_ttl, flush_interval
        )  # a fresh client bound to uvicorn's loop
    app = create_app(
        store,
        token=token,
        idle_s=idle_ttl,
        max_sessions=max_sessions,
        sweep_s=sweep_interval,
        trace=trace,
    )
    typer.echo(f"polylogue serve on http://{host}:{port} (state: {state or 'sqlite default'})")
    uvicorn.run(app, host=host, port=port, log_level="warning", ws_max_size=256 * 1024)
