"""The annotation app under attack on loopback: numbers, body size, Host header, token strength.

A real uvicorn server on 127.0.0.1 serves a study built from a real Friends benchmark; requests
go over real HTTP (httpx), as the probe of issue 18 sent them.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from benches import friends_benchmark
from browsers import serve_app

from polylogue.annotate.app import (
    MAX_BODY_BYTES,
    AccessError,
    bound_hosts,
    check_binding,
    create_study_app,
    host_allowed,
    token_problem,
)
from polylogue.annotate.store import AnnotationStore, StudyKind


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from polylogue.annotate.study import SamplingPlan, benchmark_items, create_study

    tmp = tmp_path_factory.mktemp("hardening")
    bench = friends_benchmark(tmp / "bench", 60)
    src = benchmark_items(bench, "test")
    store = AnnotationStore(tmp / "study.sqlite")
    study, keys, _ = create_study(
        store,
        "attack",
        StudyKind.TURNTAKING,
        src.items,
        SamplingPlan(1, seed=3),
        ["h1"],
        finish=src.finish,
    )
    hosts = bound_hosts("127.0.0.1")
    with (
        serve_app(lambda port: create_study_app(store, allowed_hosts=hosts, port=port)) as (
            url,
            port,
        ),
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        yield {"client": client, "key": keys["h1"], "store": store, "study": study, "port": port}


def _answer_url(env: dict[str, Any]) -> str:
    return f"/api/a/{env['key']}/items/0/answers/decision"


@pytest.mark.parametrize("seconds", ["NaN", "Infinity", "-Infinity", "-1e308", "-1", "1e9", "true"])
def test_seconds_must_be_a_plausible_number(server: dict[str, Any], seconds: str) -> None:
    body = '{"label": "SPEAK", "seconds": ' + seconds + "}"
    r = server["client"].put(
        _answer_url(server), content=body, headers={"content-type": "application/json"}
    )
    assert r.status_code == 422, r.text
    assert "'seconds' must be a number from 0 to 86400" in r.text
    who = server["store"].annotator_by_key(server["key"])
    saved = server["store"].own_answers(who, who.order[0])
    assert all(a.seconds is None or 0 <= a.seconds <= 86_400 for a in saved)


def test_plausible_seconds_are_saved(server: dict[str, Any]) -> None:
    client = server["client"]
    r = client.put(_answer_url(server), json={"label": "SILENT", "seconds": 2.5})
    assert r.status_code == 200, r.text
    who = server["store"].annotator_by_key(server["key"])
    item_id = who.order[0]
    saved = server["store"].own_answers(who, item_id)
    assert [(a.label, a.seconds) for a in saved] == [("SILENT", 2.5)]
    client.put(_answer_url(server), json={"label": "SILENT", "seconds": None})


def test_oversized_bodies_are_refused_before_parsing(server: dict[str, Any]) -> None:
    client = server["client"]
    big = b'{"label": "' + b"x" * (MAX_BODY_BYTES + 1) + b'"}'
    r = client.put("/api/a/bogus-key/items/0/answers/decision", content=big)
    assert r.status_code == 413, r.text

    def chunks() -> Iterator[bytes]:  # no Content-Length: the cap applies while reading
        yield b'{"label": "'
        for _ in range(64):
            yield b"x" * 16_384
        yield b'"}'

    r = client.put(_answer_url(server), content=chunks())
    assert r.status_code == 413, r.text
    r = client.put(_answer_url(server), json={"label": "SPEAK"})
    assert r.status_code == 200, r.text  # ordinary answers still go through


def test_host_header_must_name_the_bound_address(server: dict[str, Any]) -> None:
    client, port = server["client"], server["port"]
    state = f"/api/a/{server['key']}/state"
    assert client.get(state).status_code == 200
    assert client.get(state, headers={"host": f"localhost:{port}"}).status_code == 200
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}", ""):
        r = client.get(state, headers={"host": host})
        assert r.status_code == 421, (host, r.status_code)
        assert server["key"] not in r.text


def test_host_rules() -> None:
    assert host_allowed("[::1]:8765", bound_hosts("::1"), 8765)
    assert host_allowed("LOCALHOST:8765", bound_hosts("127.0.0.1"), 8765)
    assert not host_allowed("localhost.evil.example:8765", bound_hosts("127.0.0.1"), 8765)
    assert host_allowed("10.0.0.5:80", bound_hosts("10.0.0.5"), 80)
    assert not host_allowed("10.0.0.6:80", bound_hosts("10.0.0.5"), 80)


def test_server_token_must_look_random() -> None:
    assert token_problem("x" * 16) is not None
    assert token_problem("abababababababababab") is not None
    assert token_problem("short") is not None
    assert token_problem(secrets.token_urlsafe(24)) is None
    with pytest.raises(AccessError, match="not random enough") as err:
        check_binding("0.0.0.0", allow_remote=True, token="x" * 16)
    # The refusal suggests a strong token of its own.
    suggested = str(err.value).split("for example ")[1].split()[0]
    assert token_problem(suggested) is None


def test_cli_refuses_a_weak_token(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from polylogue.cli import app

    res = CliRunner().invoke(
        app,
        ["annotate", "serve", "--db", str(tmp_path / "x.sqlite"), "--host", "0.0.0.0",
         "--allow-remote", "--token", "x" * 16],
    )  # fmt: skip
    assert res.exit_code == 2 and "not random enough" in res.output
