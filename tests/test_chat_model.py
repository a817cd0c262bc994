"""The chat feature block and the shipped chat-domain model (``--domain chat``), on real chat."""

from __future__ import annotations

import itertools
import json
import zlib
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from polylogue.cli import app
from polylogue.conversation import Conversation, Participant, Utterance
from polylogue.corpora.irc import read_irc
from polylogue.corpora.molweni import read_molweni
from polylogue.engine.chat_features import (
    CHAT_FEATURE_NAMES,
    chat_state_from_dict,
    chat_state_to_dict,
    new_chat_state,
)
from polylogue.engine.deployment import Deployment
from polylogue.engine.engine import TurnTakingEngine
from polylogue.engine.extract import FeatureExtractor
from polylogue.engine.features import FEATURE_NAMES, N_FEATURES
from polylogue.engine.live import LiveConversation, snapshot_deployment
from polylogue.engine.model import DEFAULT_MODEL_DIR, load_model, model_dir_for
from polylogue.models.default_model import load_default_predictor
from polylogue.paths import corpus_dir
from polylogue.turntaking.dataset import BuildOptions, build_benchmark, save_benchmark
from polylogue.turntaking.points import conversation_points

pytestmark = pytest.mark.slow


def _feature(state_features: np.ndarray, name: str) -> float:
    return float(state_features[CHAT_FEATURE_NAMES.index(name)])


@pytest.fixture(scope="module")
def irc() -> Conversation:
    root = corpus_dir("ubuntu-irc-disentanglement")
    return next(iter(read_irc(root, "test")))


@pytest.fixture(scope="module")
def chat_model():  # type: ignore[no-untyped-def]
    return load_model(domain="chat")


# ----------------------------------------------------------------------------- the feature block


def test_nick_address_any_case_prefix_and_decoration() -> None:
    people = [Participant("ActionParsnip", "ActionParsnip"), Participant("bob_", "bob_")]
    s = new_chat_state(people)
    s.observe(Utterance("bob_", "how do I mount an iso?", start=0.0, end=0.0))
    s.observe(Utterance("carl", "actionparsnip how??", start=60.0, end=60.0))
    f = s.features("ActionParsnip")
    assert _feature(f, "chat_addr_target") == 1.0
    assert _feature(f, "chat_addr_target_marked") == 0.0  # no punctuation after the nick
    assert _feature(f, "chat_addr_other") == 0.0
    assert _feature(s.features("bob_"), "chat_addr_other") == 1.0
    # A unique prefix with an address mark, and a decorated nick named without decoration.
    s.observe(
        Utterance("ActionParsnip", "Bob: sudo mount -o loop x.iso /mnt", start=60.0, end=60.0)
    )
    f = s.features("bob_")
    assert _feature(f, "chat_addr_target") == 1.0 and _feature(f, "chat_addr_target_marked") == 1.0
    s.observe(Utterance("carl", "acti: thanks", start=60.0, end=60.0))
    assert _feature(s.features("ActionParsnip"), "chat_addr_target_marked") == 1.0


def test_pending_replies_reset_when_the_target_writes() -> None:
    s = new_chat_state([Participant("alice", "alice"), Participant("bob", "bob")])
    s.observe(Utterance("alice", "anyone know grub?", start=0.0, end=0.0))
    s.observe(Utterance("bob", "alice: which version?", start=60.0, end=60.0))
    s.observe(Utterance("carl", "alice, also check the logs", start=60.0, end=60.0))
    f = s.features("alice")
    assert _feature(f, "chat_pending") == 2.0
    assert _feature(f, "chat_pending_from_speaker") == 1.0
    assert _feature(f, "chat_target_last_question") == 1.0
    s.observe(Utterance("alice", "bob: grub2", start=120.0, end=120.0))
    s.observe(Utterance("bob", "ok then try update-grub", start=120.0, end=120.0))
    f = s.features("alice")
    assert _feature(f, "chat_pending") == 0.0
    assert _feature(f, "chat_target_addressed_speaker") == 1.0
    assert _feature(f, "chat_target_addressee_spoke_since") == 1.0


def test_bots_and_commands() -> None:
    s = new_chat_state([Participant("ubottu", "ubottu", role="bot")])
    s.observe(Utterance("dave", "!grub", start=0.0, end=0.0))
    f = s.features("ubottu")
    assert _feature(f, "chat_target_is_bot") == 1.0 and _feature(f, "chat_command") == 1.0


def test_extractor_appends_the_block_and_keeps_the_default_features(irc: Conversation) -> None:
    """The default model's rows are unchanged; a chat extractor only appends its block."""
    points = list(itertools.islice(conversation_points(irc), 1500, 1800))
    inputs = [p.input for p in points]
    default = load_model()
    plain = FeatureExtractor.for_model(default).features(inputs)
    assert plain.shape == (len(inputs), N_FEATURES)
    chat = FeatureExtractor(default.yield_model, default.relation_model, blocks=("chat",))
    wide = chat.features(inputs)
    assert wide.shape == (len(inputs), N_FEATURES + len(CHAT_FEATURE_NAMES))
    np.testing.assert_array_equal(wide[:, :N_FEATURES], plain)
    # Real channel traffic: some targets are addressed by nick, some owe replies.
    block = wide[:, N_FEATURES:]
    assert block[:, CHAT_FEATURE_NAMES.index("chat_addr_target")].sum() > 0
    assert block[:, CHAT_FEATURE_NAMES.index("chat_pending")].max() >= 1


def test_snapshot_round_trip(irc: Conversation) -> None:
    s = new_chat_state(irc.participants)
    for u in irc.utterances[:1200]:
        s.observe(u)
    t = chat_state_from_dict(json.loads(json.dumps(chat_state_to_dict(s))))
    assert chat_state_to_dict(t) == chat_state_to_dict(s)
    for u in irc.utterances[1200:1260]:
        s.observe(u)
        t.observe(u)
        for pid in list(s.participants)[:40]:
            np.testing.assert_array_equal(s.features(pid), t.features(pid))


# ----------------------------------------------------------------------------- the shipped model


def test_chat_domain_selects_its_own_model(chat_model) -> None:  # type: ignore[no-untyped-def]
    assert model_dir_for("chat") != DEFAULT_MODEL_DIR
    assert model_dir_for("meeting") == DEFAULT_MODEL_DIR
    assert chat_model.feature_blocks == ("chat",)
    assert chat_model.metadata["features"] == list(FEATURE_NAMES + CHAT_FEATURE_NAMES)
    assert load_model().feature_blocks == ()
    assert set(chat_model.metadata["metrics"]["validation"]["corpora"]) == {"irc", "molweni"}
    files = [p for p in model_dir_for("chat").iterdir() if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 10 * 2**20
    engine = TurnTakingEngine.load(domain="chat")
    assert engine.model.feature_blocks == ("chat",)
    dep = Deployment.resolve(domain="chat")
    assert dep.model.feature_blocks == ("chat",)
    stored = chat_model.operating_points["matched"]["chat"]["take_floor"]
    assert dep.take_floor_threshold == pytest.approx(stored)


def test_engine_streaming_matches_batch_on_a_channel(chat_model, irc: Conversation) -> None:  # type: ignore[no-untyped-def]
    points = list(itertools.islice(conversation_points(irc), 0, 400))
    batch = FeatureExtractor.for_model(chat_model).features([p.input for p in points])
    engine = TurnTakingEngine(chat_model)
    fed = 0
    names = chat_model.feature_names
    for row, p in enumerate(points):
        engine.add_participants((*p.input.present, p.input.target))
        while fed <= p.index:
            u = irc.utterances[fed]
            engine.observe(Utterance(u.speaker, u.text, u.start, u.end))
            fed += 1
        d = engine.decide(p.input.target.id, present=[q.id for q in p.input.present], explain=True)
        live = np.asarray([d.features[n] for n in names], dtype=np.float32)
        np.testing.assert_array_equal(np.isnan(live), np.isnan(batch[row]))
        np.testing.assert_allclose(np.nan_to_num(live), np.nan_to_num(batch[row]), rtol=1e-6)


def test_lower_case_nick_address_raises_p_speak(chat_model) -> None:  # type: ignore[no-untyped-def]
    people = [Participant(n, n) for n in ("ActionParsnip", "dave", "erin")]
    history = [
        Utterance("ActionParsnip", "dave: try sudo apt-get update first", start=0.0, end=0.0),
        Utterance("erin", "anyone running 24.04 on a thinkpad?", start=60.0, end=60.0),
        Utterance("dave", "ok did that", start=60.0, end=60.0),
    ]
    p = {}
    for who in ("dave", "erin"):
        for last in ("actionparsnip how??", "how??"):
            engine = TurnTakingEngine(chat_model, people)
            for u in (*history, Utterance(who, last, start=120.0, end=120.0)):
                engine.observe(u)
            p[who, last] = engine.decide("ActionParsnip").p_speak
    # erin never talked with ActionParsnip: the lower-case nick is the only cue that the
    # question is theirs. From dave, whom ActionParsnip just advised, a bare "how??" already
    # reads as a follow-up to ActionParsnip (v2.1 model: 0.70), and the nick still adds to it.
    assert p["erin", "actionparsnip how??"] > p["erin", "how??"] + 0.1, p
    assert p["dave", "actionparsnip how??"] > p["dave", "how??"], p


def test_live_snapshot_with_the_chat_model(chat_model, irc: Conversation) -> None:  # type: ignore[no-untyped-def]
    def live() -> LiveConversation:
        return LiveConversation.start(
            "ubottu",
            irc.participants[:50],
            deployment=Deployment.resolve(domain="chat", model=chat_model),
        )

    a = live()
    for u in irc.utterances[:300]:
        a.utterance(u)
    snap = json.loads(json.dumps(a.to_dict()))
    b = LiveConversation.from_dict(snap, snapshot_deployment(snap, chat_model))
    for u in irc.utterances[300:360]:
        da, db = a.utterance(u), b.utterance(u)
        assert (da.action, da.p_speak) == (db.action, db.p_speak)


def test_eval_and_decide_select_the_chat_model(tmp_path: Path) -> None:
    convs = list(itertools.islice(read_molweni(corpus_dir("molweni"), "test"), 12))
    bench = save_benchmark(
        build_benchmark(convs, BuildOptions(fractions=(0.5, 0.25, 0.25))), tmp_path / "bench"
    )
    predictor = load_default_predictor(domain="chat")
    assert predictor.model.feature_blocks == ("chat",)
    chat = Deployment.resolve(domain="chat")
    assert predictor.threshold == pytest.approx(chat.thresholds.take_floor)
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "--data",
            str(bench),
            "--domain",
            "chat",
            "--out",
            str(tmp_path / "runs"),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "BalAcc" in result.output
    bad = CliRunner().invoke(
        app, ["eval", "--data", str(bench), "--domain", "podcast", "--out", str(tmp_path / "r")]
    )
    assert bad.exit_code == 2
    # decide --domain chat reads a chat export with the chat model's matched threshold.
    path = tmp_path / "chat.jsonl"
    lines = [{"speaker": u.speaker, "text": u.text} for u in convs[0].utterances]
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n", encoding="utf-8")
    who = convs[0].utterances[0].speaker
    out = CliRunner().invoke(app, ["decide", str(path), "--as", who, "--domain", "chat", "--json"])
    assert out.exit_code == 0, out.output
    rows = [json.loads(x) for x in out.stdout.splitlines() if x.strip()]
    decided = [r for r in rows if r.get("decision")]
    assert decided
    chat_matched = load_model(domain="chat").operating_points["matched"]["chat"]["take_floor"]
    assert all(r["threshold"] == pytest.approx(chat_matched) for r in decided)


def _dialogue_level_molweni_split(convs: list[Conversation]) -> dict[str, str]:
    """The split the shipped chat model was trained with, from first principles: dev
    dialogues linked by a shared (speaker, text) message, components found by search, each
    component validation when crc32 of its first dialogue's ``dev-<id>`` is 0 mod 5."""
    dev = [c for c in convs if c.metadata["split"] == "dev"]
    holders: dict[tuple[str, str], list[int]] = {}
    for i, c in enumerate(dev):
        for u in c.utterances:
            holders.setdefault((u.speaker, u.text), []).append(i)
    component = [-1] * len(dev)
    for start in range(len(dev)):  # file order: a component's first member starts it
        if component[start] >= 0:
            continue
        stack = [start]
        component[start] = start
        while stack:
            i = stack.pop()
            for u in dev[i].utterances:
                for j in holders[(u.speaker, u.text)]:
                    if component[j] < 0:
                        component[j] = start
                        stack.append(j)
    return {
        c.id: "validation"
        if zlib.crc32(f"dev-{dev[component[i]].metadata['dialogue']}".encode()) % 5 == 0
        else "train"
        for i, c in enumerate(dev)
    }


def test_chat_benchmark_splits_keep_overlapping_molweni_windows_together() -> None:
    from polylogue.training.engine_models.chat_model import irc_train_subset, molweni_split_for

    convs = list(read_molweni(corpus_dir("molweni"), ("dev", "test")))
    split_of = molweni_split_for(convs)
    seen: dict[tuple[str, str], str] = {}
    counts: dict[str, int] = {}
    for c in convs:
        split = split_of(c.group_id)
        counts[split] = counts.get(split, 0) + 1
        if split == "test":
            assert c.metadata["split"] == "test"
            continue
        for u in c.utterances:
            # A message shared by two dev dialogues never sits in both train and validation.
            assert seen.setdefault((u.speaker, u.text), split) == split, c.group_id
    # The reader's stretches reproduce the shipped chat model's train/validation assignment.
    shipped = _dialogue_level_molweni_split(convs)
    assert {c.id: split_of(c.group_id) for c in convs if c.id in shipped} == shipped
    assert counts == {"test": 500, "train": 402, "validation": 98}
    names = [f"log{i:03d}" for i in range(133)]
    subset = irc_train_subset(names, 24)
    assert len(subset) == 24 and subset[0] == "log000" and subset[-1] > "log120"
