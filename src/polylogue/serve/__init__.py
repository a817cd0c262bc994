"""``polylogue serve``: the live turn-taking policy as an ASGI service (WebSocket + HTTP)."""
