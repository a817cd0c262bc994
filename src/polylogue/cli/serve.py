"""``polylogue serve``: the live turn-taking service (see polylogue.serve.app)."""

from __future__ import annotations

from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)


def serve(
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: any free one).")] = 8765,
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
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            help="Service processes (one per core). With more than one, sessions are shared "
            "through the state (a SQLite file or Redis), every snapshot written before its "
            "answer.",
        ),
    ] = 1,
    allow_origin: Annotated[
        list[str] | None,
        typer.Option(
            help="A web origin (scheme://host:port) whose pages may call the service from a "
            "browser; repeat for more, '*' for any. Without it, every request carrying an "
            "Origin header (every cross-site page) is refused.",
        ),
    ] = None,
    model_dir: Annotated[
        str | None,
        typer.Option(
            help="A model folder from train-default for every session (default: the shipped "
            "model of each session's domain; the chat domain has its own)."
        ),
    ] = None,
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
    import asyncio
    import signal

    import uvicorn

    from polylogue.serve.app import (
        MAX_WS_FRAME,
        SETTINGS_ENV,
        SUPERVISOR_ENV,
        ServeSettings,
        check_bind,
    )
    from polylogue.serve.guard import ListenError, listening_socket

    check_bind(host, token)
    settings = ServeSettings(
        state=state,
        token=token,
        idle_s=idle_ttl,
        max_sessions=max_sessions,
        sweep_s=sweep_interval,
        flush_s=flush_interval,
        trace=trace,
        workers=workers,
        host=host,
        port=port,
        allow_origins=tuple(allow_origin or ()),
        model_dir=model_dir,
    )
    store = settings.open_store()  # creates the SQLite table before any worker starts
    if hasattr(store, "ping"):
        asyncio.run(store.ping())  # fail now, with the URL, not at the first event
        store = settings.open_store()  # a fresh client bound to uvicorn's loop
    try:
        sock = listening_socket(host, port)  # bound before the banner: it tells the truth
    except ListenError as e:
        asyncio.run(store.close())
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(code=3) from None  # uvicorn's start-up failure code, as before
    if port == 0:  # a free port, picked by the kernel: announced and checked in Host as bound
        import dataclasses

        port = int(sock.getsockname()[1])
        settings = dataclasses.replace(settings, port=port)
    banner = (
        f"polylogue serve on http://{host}:{port} (state: {state or 'sqlite default'}, "
        f"{workers} process{'es' if workers > 1 else ''})"
    )
    # No access log: a WebSocket URL may carry ?token=.
    options = {"log_level": "warning", "access_log": False, "ws_max_size": MAX_WS_FRAME}
    if workers == 1:
        service = settings.app(store)
        config = uvicorn.Config(service, **options)  # type: ignore[arg-type]
        typer.echo(banner)

        def unclean() -> None:
            if service.state.unclean_stop:  # answered events that never reached the store
                lost = service.state.unclean_stop
                typer.echo(f"error: stopped with unwritten state: {lost}", err=True)
                raise typer.Exit(code=1)

        def after_stop(sig: int, frame: object) -> None:
            # uvicorn raises the stop signal again once it has shut down: a clean stop ends
            # by that signal as before; one that left state unwritten exits 1 instead.
            unclean()
            signal.signal(sig, signal.SIG_DFL)
            signal.raise_signal(sig)

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, after_stop)
        with sock:
            uvicorn.Server(config).run(sockets=[sock])
        unclean()
        return
    import os

    from uvicorn.supervisors import Multiprocess

    asyncio.run(store.close())  # each worker opens its own
    os.environ[SETTINGS_ENV] = settings.to_json()  # read by each worker's app factory
    os.environ[SUPERVISOR_ENV] = str(os.getpid())  # workers end when this process does
    config = uvicorn.Config(
        "polylogue.serve.app:app_from_env",
        factory=True,
        workers=workers,
        host=host,
        port=port,
        **options,  # type: ignore[arg-type]
    )
    typer.echo(banner)  # the socket listens already: workers inherit it
    with sock:
        Multiprocess(config, sockets=[sock]).run()
