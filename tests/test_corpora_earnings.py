"""Earnings-21 reader tests on the real shared corpus (``shared/data/earnings21``)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from polylogue.conversation import Conversation, ConversationFormatError
from polylogue.corpora import load_corpus
from polylogue.corpora.earnings import (
    SpeakerRun,
    align_turns_to_runs,
    alignment_stats,
    name_aliases,
    plausible_duration,
    read_call,
    read_earnings21,
    read_nlp_tokens,
    read_rttm_runs,
)
from polylogue.paths import corpus_dir


@pytest.fixture(scope="module")
def root() -> Path:
    return corpus_dir("earnings21")


@pytest.fixture(scope="module")
def calls(root: Path) -> dict[str, Conversation]:
    return {c.group_id: c for c in read_earnings21(root)}


def test_readme_counts(root: Path, calls: dict[str, Conversation]) -> None:
    assert len(calls) == 44
    assert sum(len(c) for c in calls.values()) == 3_062
    assert sum(len(c.participants) for c in calls.values()) == 467
    tokens = sum(
        len(read_nlp_tokens(p)) for p in (root / "transcripts" / "nlp_references").glob("*.nlp")
    )
    assert tokens == 362_351


def test_conversation_shape(calls: dict[str, Conversation]) -> None:
    conv = calls["4341191"]
    assert conv.id == "earnings21_4341191" and conv.group == "4341191"
    assert conv.corpus == "earnings21" and conv.domain == "earnings"
    assert conv.roster_known is False
    assert conv.metadata["company_name"] == "General Electric"
    # A turn is a maximal run of one speaker.
    assert all(
        a.speaker != b.speaker for a, b in zip(conv.utterances, conv.utterances[1:], strict=False)
    )


def test_text_keeps_case_and_reattaches_punctuation(calls: dict[str, Conversation]) -> None:
    first = calls["4320211"].utterances[0].text
    assert first.startswith(
        "Good morning ladies and gentlemen, and welcome to the Monro Inc Earnings Conference"
        " Call for the third quarter Fiscal 2020. At this time all participants"
    )


def test_operator_turn_and_name(calls: dict[str, Conversation]) -> None:
    ge = calls["4341191"]
    brandon = ge.participant("0")
    assert (brandon.name, brandon.role) == ("Brandon", "operator")
    assert "I'll be your operator" in ge.utterances[0].text
    # The CFO thanks the operator by name: the name is detectable as a vocative.
    assert ge.utterances[1].text.startswith("Thanks, Brandon.")
    assert ge.participant("2").name == "Larry Culp"
    assert set(ge.participant("2").aliases) == {"Larry", "Culp"}
    # Metadata names "Speaker 1" are placeholders: no name, but the role comes from the cues.
    monro = calls["4320211"].participant("0")
    assert monro.name is None and monro.role == "operator"


def test_roles_are_sparse_and_consistent(calls: dict[str, Conversation]) -> None:
    roles = Counter(p.role for c in calls.values() for p in c.participants)
    assert set(roles) <= {None, "operator", "analyst"}
    # At most one cue-detected operator per call (named operators aside), most calls have one.
    operators = [sum(p.role == "operator" for p in c.participants) for c in calls.values()]
    assert max(operators) == 1 and sum(operators) >= 40
    assert calls["4346818"].participant("8").role == "analyst"  # Jeff Sprague, introduced
    for conv in calls.values():
        for p in conv.participants:
            if p.role == "analyst":
                assert p.name is not None


def test_alignment_exact_when_sequences_agree(root: Path, calls: dict[str, Conversation]) -> None:
    exact = 0
    for call_id, conv in calls.items():
        runs = read_rttm_runs(root / "rttms" / f"{call_id}.rttm")
        if [u.speaker for u in conv.utterances] != [r.speaker for r in runs]:
            continue
        exact += 1
        for u, r in zip(conv.utterances, runs, strict=True):
            assert u.start == round(r.start, 3) and u.end == round(r.end, 3)
    assert exact == 26  # measured: 26 of 44 calls have identical turn and RTTM-run sequences


def test_alignment_coverage_and_sanity(root: Path, calls: dict[str, Conversation]) -> None:
    stats = [alignment_stats(c) for c in calls.values()]
    aligned = sum(s.aligned for s in stats)
    assert aligned / 3_062 > 0.93  # measured 2,901 / 3,062
    for conv in calls.values():
        rttm = read_rttm_runs(root / "rttms" / f"{conv.group}.rttm")
        runs = {(r.speaker, round(r.start, 3)): r for r in rttm}
        last = -1.0
        used: set[tuple[str, float]] = set()
        for u in conv.utterances:
            if u.start is None:
                assert u.end is None
                continue
            assert u.end is not None and u.start <= u.end
            assert u.start >= last  # monotone (overlapping runs may start together)
            last = u.start
            key = (u.speaker, u.start)
            assert key not in used  # never two turns on one run
            used.add(key)
            run = runs[key]  # the run of the turn's own speaker
            assert plausible_duration(len(u.text.split()), run.speech)


def test_alternating_stretch_is_not_shifted(calls: dict[str, Conversation]) -> None:
    # In 4359732 the RTTM lacks two one-word turns right after a long 3/1 exchange; matching
    # on speaker labels alone would shift "3, 1, 3, 1" by two and give a one-word turn 66 s.
    turns = calls["4359732"].utterances
    assert len(turns[5].text.split()) == 212 and turns[5].start is not None
    assert len(turns[7].text.split()) == 1 and turns[7].start is None
    assert len(turns[8].text.split()) == 1 and turns[8].start is None


def test_align_turns_to_runs_synthetic() -> None:
    def run(spk: str, start: float, speech: float) -> SpeakerRun:
        return SpeakerRun(spk, start, start + speech, speech)

    runs = [run("A", 0, 10), run("B", 11, 3), run("A", 15, 20), run("B", 36, 1)]
    # Turn 2 (A, 30 words) is missing from the RTTM; a label-only match would take run 2 for
    # the 3-word turn 3 instead of leaving it.
    turns = [("A", 30), ("B", 9), ("A", 60), ("B", 2)]
    assert align_turns_to_runs(turns, runs) == {0: 0, 1: 1, 2: 2, 3: 3}
    missing = [("A", 30), ("B", 9), ("A", 2), ("B", 3), ("A", 60), ("B", 2)]
    assert align_turns_to_runs(missing, runs) == {0: 0, 1: 1, 4: 2, 5: 3}
    assert align_turns_to_runs([("C", 5)], runs) == {}
    assert align_turns_to_runs([], runs) == {}


def test_name_aliases() -> None:
    assert name_aliases("Carolina Dybeck Happe") == ("Carolina", "Happe")
    assert name_aliases("Brandon") == ()
    assert name_aliases("Operator") == ()
    assert name_aliases(None) == ()


def test_call_selection_and_registry(root: Path) -> None:
    (conv,) = list(load_corpus("earnings21", calls=["4330115"]))
    assert conv.participant("0").role == "operator" and conv.participant("0").name == "Operator"
    with pytest.raises(KeyError, match="999"):
        list(read_earnings21(root, calls=["999"]))


def test_malformed_files(tmp_path: Path) -> None:
    nlp = tmp_path / "123.nlp"
    nlp.write_text("word|who\nhello|0\n", encoding="utf-8")
    with pytest.raises(ConversationFormatError, match=r"123\.nlp:line 1"):
        read_call(nlp, None)
    nlp.write_text(
        "token|speaker|ts|endTs|punctuation|case|tags|wer_tags\nhello||||.|LC|[]|[]\n",
        encoding="utf-8",
    )
    with pytest.raises(ConversationFormatError, match="line 2: empty speaker"):
        read_call(nlp, None)
    nlp.write_text("token|speaker|ts|endTs|punctuation|case|tags|wer_tags\n", encoding="utf-8")
    with pytest.raises(ConversationFormatError, match="no tokens"):
        read_call(nlp, None)
    rttm = tmp_path / "123.rttm"
    rttm.write_text("SPEAKER 123 1 abc 2.0 <NA> <NA> 0 <NA> <NA>\n", encoding="utf-8")
    with pytest.raises(ConversationFormatError, match=r"123\.rttm:line 1"):
        read_rttm_runs(rttm)


def test_call_without_rttm_has_no_times(tmp_path: Path) -> None:
    nlp = tmp_path / "77.nlp"
    nlp.write_text(
        "token|speaker|ts|endTs|punctuation|case|tags|wer_tags\n"
        "Thanks|1|||,|UC|[]|[]\nJohn|1|||.|UC|[]|[]\nSure|2|||.|UC|[]|[]\n",
        encoding="utf-8",
    )
    conv = read_call(nlp, tmp_path / "missing.rttm", names={"1": "Mary Ann Jones"})
    assert [u.text for u in conv.utterances] == ["Thanks, John.", "Sure."]
    assert all(u.start is None and u.end is None for u in conv.utterances)
    assert conv.participant("1").aliases == ("Mary", "Jones")
    assert conv.participant("2").name is None


_E22_HEADER = (
    "token|speaker|ts|endTs|punctuation|prepunctuation|case|tags|oldTs|oldEndTs|ali_comment"
)


def _as_earnings22(src: Path, dst: Path, prepunct: dict[int, str] | None = None) -> None:
    """A real Earnings-21 reference rewritten with the Earnings-22 columns (extra, reordered)."""
    lines = src.read_text(encoding="utf-8").splitlines()
    out = [_E22_HEADER]
    for k, line in enumerate(lines[1:]):
        tok, spk, ts, end, punct, case, tags, _wer = line.split("|")
        pre = (prepunct or {}).get(k, "")
        out.append("|".join([tok, spk, ts, end, punct, pre, case, tags, "", "", ""]))
    dst.write_text("\n".join(out) + "\n", encoding="utf-8")


def test_earnings22_header_with_extra_columns_reads_the_same_call(
    root: Path, calls: dict[str, Conversation], tmp_path: Path
) -> None:
    call = "4330115"
    src = root / "transcripts" / "nlp_references" / f"{call}.nlp"
    e22 = tmp_path / f"{call}.nlp"
    _as_earnings22(src, e22)
    rttm = root / "rttms" / f"{call}.rttm"
    got = read_call(e22, rttm)
    want = read_call(src, rttm)
    assert [(u.speaker, u.text, u.start) for u in got.utterances] == [
        (u.speaker, u.text, u.start) for u in want.utterances
    ]
    # prepunctuation (an opening quote) is put before the token when the column has it
    _as_earnings22(src, e22, prepunct={0: '"'})
    first = read_call(e22, None).utterances[0].text
    assert first.startswith('"') and first[1:] == want.utterances[0].text
    # only the two required columns: punctuation is then simply absent
    minimal = tmp_path / "min.nlp"
    body = [ln.split("|")[:2] for ln in src.read_text(encoding="utf-8").splitlines()[1:]]
    minimal.write_text("speaker|token\n" + "".join(f"{s}|{t}\n" for t, s in body), "utf-8")
    words = read_call(minimal, None).utterances[0].text.split()
    assert words == [w for w, s in body[: len(words)]]


def test_header_without_a_required_column_names_it(tmp_path: Path) -> None:
    nlp = tmp_path / "5.nlp"
    nlp.write_text("token|ts|endTs|punctuation\nhello|||.\n", encoding="utf-8")
    with pytest.raises(
        ConversationFormatError, match=r"5\.nlp:line 1.*required column\(s\) speaker"
    ):
        read_call(nlp, None)
