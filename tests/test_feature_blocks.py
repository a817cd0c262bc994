"""The feature-block seam (``engine/blocks.py``): the engine, the extractor and the live
conversation carry a model's blocks without knowing them; a model folder records its blocks and
is checked block by block, so a new block leaves the models that do not read it loadable.

On the shipped models and real talk: the first AMI meeting and the first Ubuntu IRC log."""

from __future__ import annotations

import copy
import itertools
import json
import shutil
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from polylogue.conversation import Conversation, Participant, Utterance
from polylogue.corpora import load_corpus
from polylogue.engine.blocks import FeatureBlock, Present, Scorer
from polylogue.engine.chat_features import CHAT_BLOCK, CHAT_FEATURE_NAMES, new_chat_state
from polylogue.engine.deployment import Deployment
from polylogue.engine.engine import TurnTakingEngine
from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.features import BASE_BLOCK, FEATURE_NAMES, N_FEATURES, is_addressed
from polylogue.engine.live import (
    LiveConversation,
    SnapshotError,
    snapshot_deployment,
    upgrade_snapshot,
)
from polylogue.engine.model import (
    FEATURE_BLOCKS,
    ModelFilesError,
    TurnTakingModel,
    load_model,
    model_dir_for,
)
from polylogue.turntaking.points import conversation_points, prepare_conversation

pytestmark = pytest.mark.slow

SNAPSHOTS = Path(__file__).parent / "snapshots"


# ----------------------------------------------------------------------------- a test-only block


@dataclass
class _Talk:
    """How many messages each speaker sent, and in all (a block no shipped model reads)."""

    n: int = 0
    sent: Counter[str] = field(default_factory=Counter)

    def register(self, people: Iterable[Participant]) -> None:
        pass

    def observe(self, u: Utterance) -> None:
        self.n += 1
        self.sent[u.speaker] += 1

    def fork(self) -> _Talk:
        return copy.deepcopy(self)


def _talk_row(
    s: _Talk, target: str, _present: Present, _keys: list[tuple[int, ...]] | None
) -> np.ndarray:
    return np.asarray([s.n, s.sent[target]], dtype=np.float32)


def _talk_from(d: dict[str, Any], _y: Scorer, _r: Scorer) -> _Talk:
    return _Talk(int(d["n"]), Counter(d["sent"]))


TALK = FeatureBlock(
    name="talk",
    names=("talk_messages", "talk_target_messages"),
    new_state=lambda _y, _r, _people: _Talk(),
    row=_talk_row,
    snapshot_key="talk_state",
    to_dict=lambda s: {"n": s.n, "sent": dict(s.sent)},
    from_dict=_talk_from,
)


@pytest.fixture
def with_talk(monkeypatch: pytest.MonkeyPatch) -> None:
    """This version gains a block (for the test's length only)."""
    monkeypatch.setitem(FEATURE_BLOCKS, TALK.name, TALK)


@pytest.fixture(scope="module")
def meeting() -> Conversation:
    return next(iter(load_corpus("ami")))


@pytest.fixture(scope="module")
def irc() -> Conversation:
    return next(iter(load_corpus("irc")))


def _utt(u: Utterance) -> Utterance:
    return Utterance(u.speaker, u.text, u.start, u.end)


def _decisions(live: LiveConversation, utterances: Iterable[Utterance]) -> list[str]:
    out = []
    for u in utterances:
        row = live.utterance(_utt(u)).to_dict()
        row.pop("latency_ms", None)  # wall clock
        out.append(json.dumps(row, sort_keys=True))
    return out


# ----------------------------------------------------------------------------- records and checks


def test_shipped_folders_without_a_blocks_record_load_by_their_features() -> None:
    """The shipped model.json files predate the record: their blocks come from the names."""
    for domain, extra in ((None, ()), ("chat", ("chat",))):
        meta = json.loads((model_dir_for(domain) / "model.json").read_text())
        assert "blocks" not in meta
        model = load_model(domain=domain)
        assert model.feature_blocks == extra
        assert [b.name for b in model.blocks] == ["base", *extra]


def test_a_saved_folder_records_its_blocks_and_reads_them_back(tmp_path: Path) -> None:
    chat = load_model(domain="chat")
    meta = json.loads((chat.save(tmp_path / "chat") / "model.json").read_text())
    assert meta["blocks"] == [
        {"name": "base", "n_features": N_FEATURES},
        {"name": "chat", "n_features": len(CHAT_FEATURE_NAMES)},
    ]
    assert "feature_blocks" not in meta  # the record replaces the older chat-only list
    assert load_model(tmp_path / "chat").feature_blocks == ("chat",)
    general = json.loads((load_model().save(tmp_path / "g") / "model.json").read_text())
    assert general["blocks"] == [{"name": "base", "n_features": N_FEATURES}]


def test_a_new_block_leaves_models_that_do_not_read_it_loadable(
    with_talk: None, meeting: Conversation, tmp_path: Path
) -> None:
    assert "talk" in FEATURE_BLOCKS
    # Both shipped folders (no record) and a recorded copy of each still load, and decide
    # exactly as before on a real meeting.
    for domain in (None, "chat"):
        shipped = load_model(domain=domain)
        assert "talk" not in [b.name for b in shipped.blocks]
        recorded = load_model(shipped.save(tmp_path / str(domain)))
        a, b = TurnTakingEngine(shipped), TurnTakingEngine(recorded)
        for u in meeting.utterances[:60]:
            a.observe(_utt(u))
            b.observe(_utt(u))
            for target in a.listeners():
                assert a.decide(target).p_speak == b.decide(target).p_speak


def _talk_model(tmp_path: Path) -> TurnTakingModel:
    """The general model's trees over a row with the talk block after base: the trees never
    split on it, so every probability is the general model's."""
    general = load_model()
    return load_model(replace(general, feature_blocks=("talk",), _stacked=None).save(tmp_path))


def test_a_model_reading_the_new_block_runs_through_engine_extractor_and_live(
    with_talk: None, meeting: Conversation, tmp_path: Path
) -> None:
    model = _talk_model(tmp_path / "talk")
    assert json.loads((tmp_path / "talk" / "model.json").read_text())["blocks"][1] == {
        "name": "talk",
        "n_features": 2,
    }
    assert model.feature_names == FEATURE_NAMES + TALK.names
    general = TurnTakingEngine(load_model())
    engine = TurnTakingEngine(model)
    conv = prepare_conversation(meeting)  # the order points index (end-ordered where timed)
    points = list(itertools.islice(conversation_points(conv), 0, 150))
    batch = FeatureExtractor.for_model(model).features([p.input for p in points])
    assert batch.shape == (len(points), N_FEATURES + 2)
    fed = 0
    for row, p in enumerate(points):
        engine.add_participants((*p.input.present, p.input.target))
        general.add_participants((*p.input.present, p.input.target))
        while fed <= p.index:
            engine.observe(_utt(conv.utterances[fed]))
            general.observe(_utt(conv.utterances[fed]))
            fed += 1
        target, present = p.input.target.id, [q.id for q in p.input.present]
        d = engine.decide(target, present=present, explain=True)
        live_row = np.asarray([d.features[n] for n in model.feature_names], dtype=np.float32)
        np.testing.assert_array_equal(np.isnan(live_row), np.isnan(batch[row]))
        np.testing.assert_allclose(np.nan_to_num(live_row), np.nan_to_num(batch[row]), rtol=1e-6)
        # The block's columns are its own state's: messages so far, the target's share.
        sent = sum(u.speaker == target for u in conv.utterances[: p.index + 1])
        assert (d.features["talk_messages"], d.features["talk_target_messages"]) == (
            p.index + 1,
            sent,
        )
        assert d.p_speak == general.decide(target, present=present).p_speak
    # Live: the snapshot carries the block's state under its key; restored, the conversation
    # goes on exactly as the one that kept running.
    dep = Deployment.resolve(model=model, model_dir=tmp_path / "talk")
    live = LiveConversation.start("B", deployment=dep)
    _decisions(live, meeting.utterances[:50])
    snap = json.loads(json.dumps(live.to_dict()))
    assert snap["talk_state"]["n"] == 50
    restored = LiveConversation.from_dict(snap, snapshot_deployment(snap, model))
    probe = live.fork()
    rest = meeting.utterances[50:90]
    assert _decisions(live, rest) == _decisions(restored, rest) == _decisions(probe, rest)
    bad = {k: v for k, v in snap.items() if k != "talk_state"}
    with pytest.raises(SnapshotError, match="lacks 'talk_state'"):
        LiveConversation.from_dict(bad, dep)


def _copy(domain: str | None, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path / "copy"
    shutil.copytree(model_dir_for(domain), folder)
    return folder, json.loads((folder / "model.json").read_text())


def _write(folder: Path, meta: dict[str, Any]) -> None:
    (folder / "model.json").write_text(json.dumps(meta), encoding="utf-8")


def test_loading_checks_each_block_and_names_the_one_that_differs(tmp_path: Path) -> None:
    # A chat feature the code no longer has (a folder without the record: names inferred).
    folder, meta = _copy("chat", tmp_path)
    i = meta["features"].index("chat_pending")
    meta["features"][i] = "chat_pending_v0"
    _write(folder, meta)
    with pytest.raises(ModelFilesError) as e:
        load_model(folder)
    msg = str(e.value)
    assert "block 'chat' has chat_pending_v0 that this version lacks and lacks chat_pending" in msg
    assert "'base'" not in msg and str(folder / "model.json") in msg
    # The same with the record; and a base feature missing from a recorded base-only model.
    meta["blocks"] = [
        {"name": "base", "n_features": N_FEATURES},
        {"name": "chat", "n_features": 26},
    ]
    _write(folder, meta)
    with pytest.raises(ModelFilesError, match="block 'chat' has chat_pending_v0"):
        load_model(folder)
    shutil.rmtree(folder)
    folder, meta = _copy(None, tmp_path)
    meta["features"] = [n for n in meta["features"] if n != "yield_logit"]
    meta["blocks"] = [{"name": "base", "n_features": N_FEATURES - 1}]
    _write(folder, meta)
    with pytest.raises(ModelFilesError, match=r"block 'base' lacks yield_logit$"):
        load_model(folder)
    # A block this version does not have, a record that does not cover the features, and a
    # legacy list that contradicts the names.
    meta["features"] = [*FEATURE_NAMES, "prosody_pitch"]
    meta["blocks"] = [
        {"name": "base", "n_features": N_FEATURES},
        {"name": "prosody", "n_features": 1},
    ]
    _write(folder, meta)
    with pytest.raises(ModelFilesError, match="block 'prosody' is not in this version"):
        load_model(folder)
    meta["blocks"] = [{"name": "base", "n_features": N_FEATURES}]
    _write(folder, meta)
    with pytest.raises(ModelFilesError, match="'blocks' covers 65 features, 'features' lists 66"):
        load_model(folder)
    meta = {k: v for k, v in meta.items() if k != "blocks"} | {
        "features": list(FEATURE_NAMES),
        "feature_blocks": ["chat"],
    }
    _write(folder, meta)
    with pytest.raises(ModelFilesError, match=r"feature_blocks \['chat'\] but the features"):
        load_model(folder)


# ----------------------------------------------------------------------------- the chat block


def test_the_chat_block_runs_through_the_seam(irc: Conversation) -> None:
    """The shipped chat model on a real channel: each block's state is fed every message, its
    columns are its own state's, and the chat block alone can say "addressed"."""
    model = load_model(domain="chat")
    engine = TurnTakingEngine(model)
    assert engine.blocks == (BASE_BLOCK, CHAT_BLOCK)
    assert FeatureExtractor.for_model(model).blocks == engine.blocks
    alone = new_chat_state()
    nick_only = 0
    for u in irc.utterances[:400]:
        engine.observe(_utt(u))
        alone.observe(_utt(u))
        for target in engine.listeners()[:6]:
            d = engine.decide(target, explain=True)
            row = np.asarray([d.features[n] for n in model.feature_names], dtype=np.float32)
            np.testing.assert_array_equal(row[N_FEATURES:], alone.features(target))
            by_name = is_addressed(row[:N_FEATURES])
            assert d.addressed == (by_name or row[N_FEATURES + _NICK] == 1.0)
            nick_only += d.addressed and not by_name
    assert nick_only > 0, "the channel should address someone by nick alone"


_NICK = CHAT_FEATURE_NAMES.index("chat_addr_target")


def test_a_version_3_snapshot_from_before_the_seam_continues(irc: Conversation) -> None:
    """A chat-model session saved by the code before the block seam (same snapshot layout,
    version 3) restores to the same snapshot, continues deterministically, and its blocks'
    states then equal those of a session that read the same messages from the start.

    The decisions themselves are the shipped model's (the file's ``next_decisions`` were made
    by the chat model before its v2.1 retrain), so they are compared run against run, and the
    model-independent part (every block's state) against a fresh replay."""
    saved = json.loads((SNAPSHOTS / "live_v3_chat.json").read_text())
    snap = saved["snapshot"]
    assert snap["version"] == 3 and {"state", "chat_state"} <= set(snap)
    assert irc.id == saved["conversation"]
    runs = []
    for _ in range(2):
        live = LiveConversation.from_dict(snap, snapshot_deployment(snap))
        # Written back as the current version: the same snapshot once upgraded.
        assert json.loads(json.dumps(live.to_dict())) == upgrade_snapshot(snap)
        got = []
        for u in irc.utterances[40:60]:
            d = live.utterance(_utt(u))
            assert d.p_speak is None or 0.0 <= d.p_speak <= 1.0
            got.append((d.index, None if d.action is None else d.action.value, d.p_speak))
        runs.append((got, live.to_dict()))
    assert runs[0][0] == runs[1][0]
    assert [i for i, _, _ in runs[0][0]] == [i for i, _, _ in saved["next_decisions"]]
    fresh = LiveConversation.start(snap["agent"]["spec"], deployment=snapshot_deployment(snap))
    _decisions(fresh, irc.utterances[:60])
    after, replayed = runs[0][1], fresh.to_dict()
    for key in ("state", "chat_state", "index", "clock"):
        assert after[key] == replayed[key], key


def test_a_snapshot_taken_is_not_changed_by_what_follows(irc: Conversation) -> None:
    """``to_dict`` hands out copies: a snapshot kept in memory (not written out at once, as
    ``serve`` does) still restores the conversation as it stood."""
    live = LiveConversation.start("kleedrac", deployment=Deployment.resolve(domain="chat"))
    _decisions(live, irc.utterances[:40])
    kept = live.to_dict()
    frozen = json.loads(json.dumps(kept))
    rest = _decisions(live, irc.utterances[40:60])
    assert json.loads(json.dumps(kept)) == frozen
    again = LiveConversation.from_dict(kept, snapshot_deployment(kept))
    assert _decisions(again, irc.utterances[40:60]) == rest
