"""Seeded fuzz of a real `polylogue serve` (issue 29, item 14): every class of bad frame and
request ends in a clear error or a correct answer; none in a traceback, a dropped socket, a
hang or silently accepted garbage. ``benchmarks/serve_probe.py`` runs more cases and prints
the counts recorded in docs/serve-measured.md."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from servers import polylogue_serve

from polylogue.conversation import Conversation
from polylogue.corpora import load_corpus
from polylogue.serve.app import MAX_MESSAGE
from polylogue.serve.client import create_session, utterance_events
from polylogue.serve.probe import make_cases, run_cases

pytestmark = pytest.mark.slow

N_CASES = 480  # 20 of each class; a few seconds against one server


@pytest.fixture(scope="module")
def ami() -> Conversation:
    return next(iter(load_corpus("ami")))


def test_fuzzed_frames_and_requests_end_in_clear_errors(tmp_path: Path, ami: Conversation) -> None:
    """Two seeds, each on a session of its own, against one server (one start-up)."""
    log = tmp_path / "server.log"
    with polylogue_serve("--state", str(tmp_path / "s.sqlite"), output=log) as url:
        for seed in (0, 1):
            sid = create_session(url, "B", ami.participants)
            cases = make_cases(seed, N_CASES, utterance_events(ami.utterances), MAX_MESSAGE)
            tally = run_cases(url, sid, cases)
            summary = httpx.get(f"{url}/v1/sessions/{sid}").json()
            counts = tally.to_dict()
            assert counts["cases"] == N_CASES
            assert (counts["silent"], counts["traceback"], counts["hang"]) == (0, 0, 0), counts
            assert counts["clear"] > 0 and counts["correct"] > 0
            # Every class was exercised, and resends were skipped: the valid events were fed
            # once.
            assert len(counts["by_kind"]) == 24
            valid = counts["by_kind"]["valid"]["correct"]
            assert summary["last_seq"] == valid - 1
    assert "Traceback" not in log.read_text()
