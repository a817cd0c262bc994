"""`polylogue.serve.client` builds what the server accepts: its events and session bodies pass
the server's own validation unchanged (real AMI utterances, no server needed)."""

from __future__ import annotations

from polylogue.corpora import load_corpus
from polylogue.serve.app import SessionIn, parse_event
from polylogue.serve.client import session_body, utterance_events


def test_events_and_bodies_pass_the_servers_validation_unchanged() -> None:
    ami = next(iter(load_corpus("ami")))
    events = utterance_events(ami.utterances[:50], first_seq=7)
    assert [e["seq"] for e in events] == list(range(7, 57))
    for e, u in zip(events, ami.utterances, strict=False):
        assert set(e) == {"type", "seq", "speaker", "text", "start", "end"}
        parsed = parse_event(e)
        assert (parsed.speaker, parsed.text, parsed.start, parsed.end) == (
            u.speaker,
            u.text,
            u.start,
            u.end,
        )
        assert parsed.final  # the server's default: not sent
    body = session_body("B", ami.participants)
    spec = SessionIn.model_validate(body)
    assert spec.agent == "B"
    assert [p.to_participant() for p in spec.participants] == list(ami.participants)
