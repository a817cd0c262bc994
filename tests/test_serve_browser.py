"""A web page on another loopback origin against `polylogue serve`, in Debian's Chromium
(issue 29, item 12): cross-site POSTs, reads and WebSockets are refused, a DNS-rebinding name
gets 421, and ``--allow-origin`` lets exactly the named origin in."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from browsers import CHROMIUM, CHROMIUM_ARGS, require_chromium
from servers import polylogue_serve

from polylogue.conversation import Conversation
from polylogue.corpora import load_corpus
from polylogue.serve.client import session_body

pytestmark = pytest.mark.slow

playwright_api = require_chromium()

#: What the page tries, with the service's base URL and a session id it learnt somehow.
PAGE_JS = """
async ([base, sid, body]) => {
  const out = {};
  // 1. A "simple" cross-site POST: no preflight, the response is opaque to the page.
  try {
    await fetch(base + "/v1/sessions", {method: "POST", mode: "no-cors",
      headers: {"Content-Type": "text/plain"}, body: JSON.stringify(body)});
    out.simple_post = "sent";
  } catch (e) { out.simple_post = "network error"; }
  // 2. A CORS POST with JSON (preflighted) and a read of the session's roster.
  try {
    const r = await fetch(base + "/v1/sessions", {method: "POST",
      headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
    out.cors_post = r.status; out.created = (await r.json()).session_id || null;
  } catch (e) { out.cors_post = "blocked"; }
  try {
    const r = await fetch(base + "/v1/sessions/" + sid);
    out.read = r.status;
  } catch (e) { out.read = "blocked"; }
  // 3. A WebSocket to the session's stream.
  const target = out.created || sid;
  out.ws = await new Promise((resolve) => {
    const ws = new WebSocket(base.replace("http", "ws") + "/v1/sessions/" + target + "/stream");
    const timer = setTimeout(() => resolve("timeout"), 15000);
    ws.onopen = () => ws.send(JSON.stringify(
      {type: "utterance", seq: 0, speaker: "A", text: "B, can you check the budget?"}));
    ws.onmessage = (m) => {
      clearTimeout(timer); resolve(JSON.parse(m.data).ok ? "ok" : "error"); ws.close();
    };
    ws.onerror = () => { clearTimeout(timer); resolve("refused"); };
  });
  return out;
}
"""


@pytest.fixture(scope="module")
def ami() -> Conversation:
    return next(iter(load_corpus("ami")))


@contextmanager
def page_server(root: Path) -> Iterator[str]:
    """Static pages from ``root`` on another loopback port: another origin."""
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        # rebind.test resolves to 127.0.0.1 for this browser: a DNS-rebinding name.
        args = [*CHROMIUM_ARGS, "--host-resolver-rules=MAP rebind.test 127.0.0.1"]
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        yield b
        b.close()


def _attack(browser: Any, page_url: str, base: str, sid: str, body: dict) -> dict:
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(page_url)
        return dict(page.evaluate(PAGE_JS, [base, sid, body]))
    finally:
        context.close()


def test_a_page_on_another_origin_cannot_use_the_service(
    tmp_path: Path, ami: Conversation, browser: Any
) -> None:
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "index.html").write_text("<!doctype html><title>elsewhere</title>")
    body = session_body("B", ami.participants)
    with (
        page_server(tmp_path / "www") as origin,
        polylogue_serve("--state", str(tmp_path / "a.sqlite")) as base,
    ):
        sid = httpx.post(f"{base}/v1/sessions", json=body).json()["session_id"]
        out = _attack(browser, f"{origin}/index.html", base, sid, body)
        assert out["cors_post"] == "blocked" and out["read"] == "blocked", out
        assert out["ws"] == "refused", out
        # The simple POST reached the server and was refused there: still one session.
        assert httpx.get(f"{base}/healthz").json()["sessions_cached"] == 1
        assert httpx.get(f"{base}/v1/sessions/{sid}").json()["utterances"] == 0
        # A DNS-rebinding name for 127.0.0.1, opened in the browser: 421, no roster.
        port = base.rsplit(":", 1)[1]
        page = browser.new_page()
        try:
            r = page.goto(f"http://rebind.test:{port}/v1/sessions/{sid}")
            assert r is not None and r.status == 421
            assert "participants" not in page.content()
        finally:
            page.close()
    with (
        page_server(tmp_path / "www") as origin,
        polylogue_serve("--state", str(tmp_path / "b.sqlite"), "--allow-origin", origin) as base,
    ):
        sid = httpx.post(f"{base}/v1/sessions", json=body).json()["session_id"]
        out = _attack(browser, f"{origin}/index.html", base, sid, body)
        # The allowed origin's page may create sessions, read them and stream.
        assert out["cors_post"] == 201 and out["created"], out
        assert out["read"] == 200 and out["ws"] == "ok", out
        assert httpx.get(f"{base}/v1/sessions/{out['created']}").json()["utterances"] == 1
