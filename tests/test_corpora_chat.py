"""Chat readers (Ubuntu IRC disentanglement, Molweni) on the real shared corpora."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from polylogue.conversation import Conversation, ConversationFormatError
from polylogue.corpora import CORPORA, load_corpus
from polylogue.corpora.chat import leading_address, mentions, nick_lookup
from polylogue.corpora.irc import BOT_NICKS, read_irc, read_irc_file, thread_conversations
from polylogue.corpora.molweni import read_molweni
from polylogue.paths import corpus_dir
from polylogue.turntaking.chat import present_in_window
from polylogue.turntaking.points import conversation_points


@pytest.fixture(scope="module")
def irc_root() -> Path:
    return corpus_dir("ubuntu-irc-disentanglement")


@pytest.fixture(scope="module")
def irc_dev(irc_root: Path) -> list[Conversation]:
    return list(read_irc(irc_root, splits="dev"))


@pytest.fixture(scope="module")
def molweni() -> list[Conversation]:
    return list(read_molweni(corpus_dir("molweni")))


def _raw_kinds(path: Path) -> tuple[int, int, int]:
    """(message or action lines, system or other lines, all lines) counted straight from a file."""
    lines = path.read_text(encoding="utf-8").split("\n")[:-1]
    msgs = sum(1 for ln in lines if re.match(r"\[\d\d:\d\d\] (<|\s+\* )", ln))
    blank = sum(1 for ln in lines if not ln.strip())
    return msgs, len(lines) - msgs - blank, len(lines)


def test_both_readers_are_registered() -> None:
    assert {"irc", "molweni"} <= set(CORPORA.names())
    first = next(iter(load_corpus("molweni")))
    assert first.corpus == "molweni" and first.domain == "chat"


def test_irc_dev_matches_readme_counts(irc_root: Path, irc_dev: list[Conversation]) -> None:
    # README: dev has 10 files, 12,500 lines and 2,607 links.
    assert len(irc_dev) == 10
    assert sum(c.metadata["lines"] for c in irc_dev) == 12_500
    assert sum(c.metadata["links"] for c in irc_dev) == 2_607
    for conv in irc_dev:
        raw = Path(conv.source or "")
        msgs, system, n = _raw_kinds(raw)
        assert len(conv.utterances) == msgs
        assert len(conv.metadata["events"]) == system
        assert conv.metadata["lines"] == n
        assert conv.group == raw.name.removesuffix(".raw.txt")


def test_irc_test_split_link_count(irc_root: Path) -> None:
    convs = list(read_irc(irc_root, splits="test"))
    assert len(convs) == 10 and sum(c.metadata["links"] for c in convs) == 5_187


def test_irc_reply_links_give_addressees(irc_root: Path) -> None:
    conv = read_irc_file(
        irc_root / "data/dev/2005-06-27_12.raw.txt",
        irc_root / "data/dev/2005-06-27_12.annotation.txt",
    )
    by_line = {u.id: u for u in conv.utterances}
    lines = Path(conv.source or "").read_text(encoding="utf-8").split("\n")
    links = [
        tuple(int(x) for x in ln.split()[:2])
        for ln in (irc_root / "data/dev/2005-06-27_12.annotation.txt").read_text().splitlines()
    ]
    checked = 0
    for parent, child in links:
        u = by_line.get(f"2005-06-27_12:{child}")
        p = by_line.get(f"2005-06-27_12:{parent}")
        if u is None or p is None:
            continue
        assert u.addressees is not None
        if parent == child:
            continue
        author = lines[parent].split("<", 1)[1].split(">", 1)[0]
        assert p.speaker == author
        if author != u.speaker:
            assert author in u.addressees
            checked += 1
    assert checked > 100
    # Context lines (before the first link) are unannotated.
    first = conv.metadata["annotated_from"]
    assert first == 1000
    assert all(u.addressees is None for u in conv.utterances if int(u.id.split(":")[1]) < first)


def test_irc_events_actions_and_times(irc_dev: list[Conversation]) -> None:
    conv = irc_dev[0]
    kinds = {e["kind"] for e in conv.metadata["events"]}
    assert {"join", "quit", "nick"} <= kinds
    assert all(not u.text.startswith("===") for u in conv.utterances)
    starts = [u.start for u in conv.utterances]
    assert starts[0] == 0.0 and all(b >= a for a, b in itertools.pairwise(starts))
    actions = [u for c in irc_dev for u in c.utterances if u.dialogue_act == "action"]
    assert actions and all(u.text.startswith("/me") for u in actions)
    bots = [p for c in irc_dev for p in c.participants if p.role == "bot"]
    bot_ids = {p.id.lower() for p in bots}
    assert {"ubotu", "ubottu"} & bot_ids and bot_ids <= BOT_NICKS


def test_irc_threads_partition_the_annotated_messages(irc_dev: list[Conversation]) -> None:
    conv = irc_dev[1]
    threads = thread_conversations(conv)
    annotated = [t for t in conv.metadata["thread"] if t is not None]
    assert sum(len(t.utterances) for t in threads) == len(annotated)
    assert len(threads) == len(set(annotated)) > 10
    for t in threads:
        assert t.group == conv.group
        # A thread's messages keep the channel order.
        idx = [conv.utterances.index(u) for u in t.utterances]
        assert idx == sorted(idx)


def test_irc_errors_name_file_and_line(tmp_path: Path) -> None:
    raw = tmp_path / "x.raw.txt"
    raw.write_text("[10:00] <alice> hi bob\n[10:01] <bob> alice: hi\nnot a log line\n")
    with pytest.raises(ConversationFormatError, match=r"x\.raw\.txt:line 3: not an IRC log line"):
        read_irc_file(raw)
    raw.write_text("[10:00] <alice> hi bob\n[10:01] <bob> alice: hi\n")
    ann = tmp_path / "x.annotation.txt"
    ann.write_text("0 0 -\n0 1 -\nzero one\n")
    with pytest.raises(ConversationFormatError, match=r"x\.annotation\.txt:line 3"):
        read_irc_file(raw, ann)
    ann.write_text("0 0 -\n0 7 -\n")
    with pytest.raises(ConversationFormatError, match=r"line 2: link 0 -> 7 points past the end"):
        read_irc_file(raw, ann)
    ann.write_text("0 0 -\n0 1 -\n")
    conv = read_irc_file(raw, ann)
    assert conv.utterances[1].addressees == ("alice",)
    assert conv.utterances[0].addressees == ()
    with pytest.raises(ValueError, match="not in splits dev: nope"):
        list(read_irc(corpus_dir("ubuntu-irc-disentanglement"), "dev", files=["nope"]))
    # The clock passes midnight.
    raw.write_text("[23:59] <alice> still up?\n[00:01] <bob> alice: yes\n")
    assert [u.start for u in read_irc_file(raw).utterances] == [0.0, 120.0]


def test_molweni_matches_readme_counts(molweni: list[Conversation]) -> None:
    dev = [c for c in molweni if c.metadata["split"] == "dev"]
    test = [c for c in molweni if c.metadata["split"] == "test"]
    assert (len(dev), len(test)) == (500, 500)
    assert sum(len(c.utterances) for c in dev) == 4_386
    assert sum(len(c.utterances) for c in test) == 4_430
    assert sum(len(r) for c in dev for r in c.metadata["reply_to"]) == 3_880
    assert sum(len(r) for c in test for r in c.metadata["reply_to"]) == 3_911


def test_molweni_addressee_is_speaker_of_attached_edu(molweni: list[Conversation]) -> None:
    raw = json.loads((corpus_dir("molweni") / "DP" / "test.json").read_text(encoding="utf-8"))
    convs = {c.id: c for c in molweni}
    for item in raw[:100]:
        conv = convs[f"molweni-test-{item['id']}"]
        assert conv.utterances[0].addressees is None
        for r in item["relations"]:
            x, y = r["x"], r["y"]
            spk_x = item["edus"][x]["speaker"]
            u = conv.utterances[y]
            assert u.addressees is not None
            assert (spk_x in u.addressees) == (spk_x != item["edus"][y]["speaker"])
            assert r["type"] in (u.dialogue_act or "")
    # Detokenised text: "llutz , you" -> "llutz, you".
    assert " , " not in molweni[0].utterances[0].text


def test_molweni_errors_name_file_and_record(tmp_path: Path) -> None:
    bad = tmp_path / "test.json"
    item = {"id": "7", "edus": [{"text": "hi", "speaker": "a"}], "relations": [{"x": 0, "y": 3}]}
    bad.write_text(json.dumps([item]))
    with pytest.raises(ConversationFormatError, match=r"test\.json:dialogue 0 \(id 7\) rel"):
        list(read_molweni(tmp_path, "test"))
    bad.write_text('[{"id": 1,\n "edus": [}]')
    with pytest.raises(ConversationFormatError, match=r"test\.json:line 2"):
        list(read_molweni(tmp_path, "test"))


def test_nick_address_with_and_without_punctuation_any_case() -> None:
    from polylogue.corpora.irc import nick_participant

    nicks = nick_lookup([nick_participant(n) for n in ("ActionParsnip", "|trey|", "bob2")])
    for text in (
        "ActionParsnip: how?",
        "actionparsnip, how??",
        "actionparsnip how??",
        "@ActionParsnip thanks",
        "ACTIONPARSNIP> ok",
    ):
        assert leading_address(text, nicks) == "ActionParsnip", text
    assert leading_address("|trey|, top in the list", nicks) == "|trey|"
    assert leading_address("how do I ask actionparsnip", nicks) is None
    assert leading_address("bob2: me", nicks, speaker="bob2") is None
    assert mentions("ask |trey| or ActionParsnip.", nicks) == ["|trey|", "ActionParsnip"]


def test_builder_presence_window_bounds_targets(irc_dev: list[Conversation]) -> None:
    conv = irc_dev[0]
    window = conv.metadata["presence_window"]
    real = {p.id for p in conv.participants}
    present = present_in_window(conv.utterances, real, window)
    assert max(len(p) for p in present) <= 2 * window
    # Someone silent and unaddressed for a whole window is no longer a target.
    for i in range(window, len(conv.utterances), 97):
        recent = conv.utterances[i - window + 1 : i + 1]
        active = {u.speaker for u in recent} | {a for u in recent for a in u.addressees or ()}
        assert present[i] == frozenset(active & real)
    pts = list(conversation_points(conv))
    nicks = nick_lookup(conv.participants)
    for p in pts[::50]:
        recent = conv.utterances[max(0, p.index - window + 1) : p.index + 1]
        seen = {u.speaker for u in recent} | {a for u in recent for a in u.addressees or ()}
        seen |= {m for u in recent for m in mentions(u.text, nicks)}
        assert p.input.target.id in seen
    labels = {p.gold.label.value for p in pts}
    assert labels == {"SPEAK", "SILENT"}


def test_builder_counts_chat_nick_address_without_punctuation() -> None:
    from polylogue.conversation import Utterance
    from polylogue.corpora.irc import nick_participant

    utts = (
        Utterance("ActionParsnip", "try sudo apt-get install foo"),
        Utterance("bob2", "that fails for me"),
        Utterance("carol", "actionparsnip the log is empty??"),
        Utterance("ActionParsnip", "carol: read the log"),
    )
    parts = tuple(nick_participant(n) for n in ("ActionParsnip", "bob2", "carol"))
    chat = Conversation("c", "user", utts, parts, domain="chat")
    pts = {p.point_id: p for p in conversation_points(chat)}
    gold = pts["c:2:ActionParsnip"].gold
    assert gold.addressed and gold.address_evidence == "nick" and gold.category.value == "I1"
    # bob2 spoke just before: a silent participant of the exchange (S3, benchmark v2.1).
    assert pts["c:2:bob2"].gold.category.value == "S3"
    # The same text in a meeting transcript is only a mention: the speech rules need a comma or
    # a word that opens an address ("Rachel you have to...") after the name.
    meeting = Conversation("m", "user", utts, parts, domain="meeting")
    g = {p.point_id: p for p in conversation_points(meeting)}["m:2:ActionParsnip"].gold
    assert not g.addressed and g.referenced


def test_molweni_groups_are_stretches_of_overlapping_dialogues(
    molweni: list[Conversation],
) -> None:
    by_split: dict[str, list[Conversation]] = {}
    for c in molweni:
        by_split.setdefault(c.metadata["split"], []).append(c)
    for split, convs in by_split.items():
        group_of: dict[tuple[str, str], str] = {}
        members: dict[str, list[Conversation]] = {}
        for c in convs:
            assert c.id == f"molweni-{split}-{c.metadata['dialogue']}"
            members.setdefault(c.group_id, []).append(c)
            for u in c.utterances:
                # No message of one split file is in two stretches.
                assert group_of.setdefault((u.speaker, u.text), c.group_id) == c.group_id
        for group, ms in members.items():
            # Named after its first dialogue (file order), and connected: growing from the
            # first member over shared messages reaches every member.
            assert group == f"{split}-stretch-{ms[0].metadata['dialogue']}"
            reached = {ms[0].id}
            msgs = {(u.speaker, u.text) for u in ms[0].utterances}
            grew = True
            while grew:
                grew = False
                for m in ms:
                    keys = {(u.speaker, u.text) for u in m.utterances}
                    if m.id not in reached and keys & msgs:
                        reached.add(m.id)
                        msgs |= keys
                        grew = True
            assert reached == {m.id for m in ms}, group
        assert all(
            (c.metadata.get("benchmark_split") == "test") == (split == "test") for c in convs
        )
    dev_msgs = {(u.speaker, u.text) for c in by_split["dev"] for u in c.utterances}
    cross = sum(
        bool({(u.speaker, u.text) for u in c.utterances} & dev_msgs) for c in by_split["test"]
    )
    # The authors' dev/test split is kept: a few test windows overlap dev (15 of 500).
    assert 0 < cross < 25
    assert len({c.group_id for c in by_split["dev"]}) < len(by_split["dev"]) // 2


def test_molweni_build_keeps_stretches_in_one_split(molweni: list[Conversation]) -> None:
    from polylogue.turntaking.dataset import BuildOptions, build_benchmark

    build = build_benchmark(molweni, BuildOptions())
    split_of: dict[str, set[str]] = {}
    for p in build.points:
        split_of.setdefault(p.group, set()).add(p.split)
    assert all(len(s) == 1 for s in split_of.values())
    file_split = {c.group_id: c.metadata["split"] for c in molweni}
    for group, (split,) in split_of.items():
        # The official test file is the test split; dev stretches are train or validation.
        assert (split == "test") == (file_split[group] == "test"), group
    # No dev message is both in train and in validation.
    seen: dict[tuple[str, str], str] = {}
    for c in molweni:
        if c.group_id in split_of and file_split[c.group_id] == "dev":
            (split,) = split_of[c.group_id]
            for u in c.utterances:
                assert seen.setdefault((u.speaker, u.text), split) == split
    assert {p.split for p in build.points} == {"train", "validation", "test"}


def test_pinned_benchmark_split_must_be_a_split(molweni: list[Conversation]) -> None:
    from dataclasses import replace

    from polylogue.errors import PolylogueInputError
    from polylogue.turntaking.dataset import FIXED_SPLIT_KEY, BuildOptions, build_benchmark

    conv = molweni[0]
    bad = replace(conv, metadata={**conv.metadata, FIXED_SPLIT_KEY: "holdout"})
    with pytest.raises(PolylogueInputError, match=rf"{conv.id}.*'holdout' is not one of"):
        build_benchmark([bad, *molweni[1:6]], BuildOptions())
