"""The deployment layer: one resolution of model, domain, operating point and role; the same
action for the same stream from every front end (decide file and stdin, serve, LiveKit,
Pipecat); one clear error for a bad option in each of them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest
from front_ends import actions_of, decide_rows, livekit_rows, pipecat_rows
from servers import polylogue_serve
from typer.testing import CliRunner

from polylogue.cli import app
from polylogue.conversation import Conversation, Utterance
from polylogue.corpora import load_corpus
from polylogue.engine.deployment import (
    DEFAULT_OPERATING_POINT,
    OPERATING_POINTS,
    Action,
    Deployment,
    DeploymentError,
    choose_action,
)
from polylogue.engine.live import LiveConversation
from polylogue.engine.model import DEFAULT_MODEL_DIR, DOMAINS, load_model, model_dir_for

N = 120


@pytest.fixture(scope="module")
def meeting() -> Conversation:
    """The first shared AMI meeting (four speakers), untimed: LiveKit and Pipecat carry no
    times, so every front end sees exactly the same stream."""
    conv = next(iter(load_corpus("ami")))
    assert len({u.speaker for u in conv.utterances}) >= 4
    return conv


def _lines(conv: Conversation) -> list[dict]:
    return [{"speaker": u.speaker, "text": u.text} for u in conv.utterances[:N]]


# ----------------------------------------------------------------------------- resolution


def test_shipped_models_carry_every_point_for_every_domain() -> None:
    for folder in {model_dir_for(None), model_dir_for("chat")}:
        model = load_model(folder)
        for point in OPERATING_POINTS:
            for domain in (None, *DOMAINS):
                dep = Deployment.resolve(model=model, domain=domain, operating_point=point)
                assert 0.0 < dep.take_floor_threshold < 1.0
                assert dep.addressed_only == (point == "addressed-only")
    general = load_model()
    for domain in DOMAINS:
        pts = {
            p: general.operating_points[p][domain]["take_floor"] for p in general.operating_points
        }
        # Polite never speaks more than matched (the chooser's floor). Matched matches the real
        # rate, so it sits above balanced wherever balanced over-speaks, which is every domain
        # the general model serves; its "chat" point (Molweni only; --domain chat loads the
        # chat model) is the exception, where balanced already under-speaks.
        assert pts["matched"] <= pts["polite"], (domain, pts)
        if domain != "chat":
            assert pts["balanced"] <= pts["matched"], (domain, pts)


def test_default_point_domain_model_and_overrides() -> None:
    dep = Deployment.resolve()
    assert dep.operating_point == DEFAULT_OPERATING_POINT == "matched"
    assert dep.model_dir == DEFAULT_MODEL_DIR
    chat = Deployment.resolve(domain="chat")
    assert chat.model.feature_blocks == ("chat",)
    raw = Deployment.resolve(domain="tv", operating_point="polite", threshold=0.5)
    assert raw.take_floor_threshold == 0.5 and raw.operating_point == "polite"
    assert raw.options() == {
        "domain": "tv",
        "operating_point": "polite",
        "threshold": 0.5,
        "role": None,
    }
    assert Deployment.from_options(raw.options()).thresholds == raw.thresholds
    # Roles are presets over the point: the assistant answers only when addressed.
    assistant = Deployment.resolve(role="assistant")
    assert assistant.operating_point == "addressed-only" and assistant.addressed_only
    observer = Deployment.resolve(role="observer")
    assert not observer.speaks and observer.operating_point == "matched"


@pytest.mark.parametrize(
    ("options", "option", "names"),
    [
        ({"operating_point": "loud"}, "operating point", "balanced, matched, polite"),
        ({"domain": "podcast"}, "domain", "meeting, tv, earnings, chat"),
        ({"threshold": 1.5}, "threshold", "outside [0, 1]"),
        ({"threshold": -0.1}, "threshold", "outside [0, 1]"),
        ({"role": "boss"}, "role", "observer, assistant, facilitator"),
    ],
)
def test_bad_options_name_the_option_and_the_choices(options, option, names) -> None:
    with pytest.raises(DeploymentError, match=names.replace("[", r"\[").replace("]", r"\]")) as e:
        Deployment.resolve(**options)
    assert e.value.option == option


def test_a_folder_without_the_requested_point(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    shutil.copytree(DEFAULT_MODEL_DIR, folder, ignore=shutil.ignore_patterns("chat"))
    meta = json.loads((folder / "model.json").read_text(encoding="utf-8"))
    del meta["operating_points"]  # a folder written before operating points existed
    (folder / "model.json").write_text(json.dumps(meta), encoding="utf-8")
    # It still has the balanced point (its old thresholds) ...
    old = Deployment.resolve(model_dir=folder, domain="tv", operating_point="balanced")
    assert old.take_floor_threshold == meta["domain_thresholds"]["tv"]
    # ... and asking for another is one error naming the folder and what it has.
    with pytest.raises(DeploymentError, match=r"has no 'matched' point \(it has: balanced\)"):
        Deployment.resolve(model_dir=folder)
    result = CliRunner().invoke(
        app, ["decide", "examples/standup.jsonl", "--as", "Dave", "--model-dir", str(folder)]
    )
    assert result.exit_code == 2 and "--operating-point" in result.output


def test_every_cli_front_end_refuses_a_bad_option_with_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    cases = [
        ["decide", "examples/standup.jsonl", "--as", "Dave", "--operating-point", "loud"],
        ["decide", "examples/standup.jsonl", "--as", "Dave", "--threshold", "2"],
        ["decide", "examples/standup.jsonl", "--as", "Dave", "--domain", "podcast"],
        ["decide", "examples/standup.jsonl", "--as", "Dave", "--role", "boss"],
        ["tune-threshold", "--data", str(tmp_path), "--operating-point", "loud"],
        ["eval", "--data", str(tmp_path), "--operating-point", "loud"],
    ]
    for args in cases:
        r = runner.invoke(app, args)
        assert r.exit_code == 2, (args, r.output)
        assert "Traceback" not in r.output
    r = runner.invoke(app, cases[0])
    assert "balanced, matched, polite, addressed-only" in r.output


# ----------------------------------------------------------------------------- one rule


def test_the_rule_over_three_probabilities() -> None:
    dep = Deployment.resolve(domain="meeting")
    t = dep.thresholds
    assert choose_action(t.take_floor, 0.0, t) is Action.SPEAK
    assert choose_action(t.take_floor - 0.01, 0.0, t) is Action.SILENT
    if t.backchannel <= 1.0:
        # A likely acknowledgement wins over a floor take that is not much likelier.
        assert (
            choose_action(t.take_floor, max(t.backchannel, t.take_floor), t) is Action.BACKCHANNEL
        )
    addressed_only = Deployment.resolve(operating_point="addressed-only")
    assert addressed_only.choose(0.99, 0.0, addressed=False) is Action.SILENT
    assert addressed_only.choose(0.99, 0.0, addressed=True) is Action.SPEAK


# ----------------------------------------------------------------------------- front ends


def test_every_front_end_gives_the_same_actions(tmp_path: Path, meeting: Conversation) -> None:
    lines = _lines(meeting)
    path = tmp_path / "meeting.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    agent, opts = "B", ["--domain", "meeting"]
    file_rows = decide_rows(["decide", str(path), "--as", agent, "--json", *opts], process=True)
    want = actions_of(file_rows)
    decided = [a for _, a in want if a is not None]
    assert {"SPEAK", "SILENT"} <= set(decided), "the stream should exercise both actions"
    # stdin
    stdin_rows = decide_rows(
        ["decide", "-", "--as", agent, "--json", *opts], path.read_text(), process=True
    )
    assert actions_of(stdin_rows) == want
    assert [r["p_speak"] for r in stdin_rows] == [r["p_speak"] for r in file_rows]
    # serve: one session, the same utterances as HTTP events
    with polylogue_serve("--state", str(tmp_path / "s.sqlite")) as url:
        r = httpx.post(
            f"{url}/v1/sessions", json={"agent": agent, "deployment": {"domain": "meeting"}}
        )
        assert r.status_code == 201, r.text
        assert r.json()["deployment"]["operating_point"] == "matched"
        sid = r.json()["session_id"]
        events = [{"type": "utterance", "seq": i, **x} for i, x in enumerate(lines)]
        res = httpx.post(f"{url}/v1/sessions/{sid}/events", json=events, timeout=60).json()
        served = [(x["decision"]["index"], x["decision"]["action"]) for x in res["results"]]
        # Bad deployment options: 400 with the message.
        for bad, word in (
            ({"operating_point": "loud"}, "matched"),
            ({"threshold": 3}, "outside [0, 1]"),
            ({"model_dir": "/tmp"}, "serve --model-dir"),
        ):
            r = httpx.post(f"{url}/v1/sessions", json={"agent": agent, "deployment": bad})
            assert r.status_code == 400 and word in r.json()["error"], r.text
    assert served == want
    # The LiveKit reply gate and the Pipecat gate on the same stream.
    assert _livekit_actions(meeting, agent) == [
        a for u, (_, a) in zip(lines, want, strict=True) if u["speaker"] != agent
    ]
    assert _pipecat_actions(meeting, agent) == [
        a for u, (_, a) in zip(lines, want, strict=True) if u["speaker"] != agent
    ]


def _livekit_actions(conv: Conversation, agent: str) -> list[str | None]:
    pytest.importorskip("livekit.agents")
    lines = [Utterance(u.speaker, u.text) for u in conv.utterances[:N]]
    rows = livekit_rows(lines, agent, Deployment.resolve(domain="meeting"))
    return [r["decision"] for r in rows]


def _pipecat_actions(conv: Conversation, agent: str) -> list[str | None]:
    pytest.importorskip("pipecat")
    # A real pipeline (gate and tap): the humans' lines as TranscriptionFrames, the bot's as
    # bot-speaking frames around their TTS text, each line queued once the previous one has
    # passed (queued all at once, Pipecat's system frames overtake the text frames and the
    # bot's consecutive lines arrive as one utterance).
    lines = [Utterance(u.speaker, u.text) for u in conv.utterances[:N]]
    rows = pipecat_rows(lines, agent, Deployment.resolve(domain="meeting"))
    return [r["decision"] for r in rows]


def test_observer_logs_what_it_would_do_and_never_speaks(meeting: Conversation) -> None:
    dep = Deployment.resolve(domain="meeting")
    speaking = LiveConversation.start("B", deployment=dep)
    observer = LiveConversation.start("B", deployment=dep.with_role("observer"))
    for u in meeting.utterances[:N]:
        a = speaking.utterance(Utterance(u.speaker, u.text))
        b = observer.utterance(Utterance(u.speaker, u.text))
        assert b.suggested == a.action and b.p_speak == a.p_speak
        assert b.action in (None, Action.SILENT)
    # Switched back at run time, it acts again.
    observer.set_role(None)
    d = observer.utterance(Utterance("A", "B, what do you think about the price?"))
    assert d.action is d.suggested


def test_facilitator_steps_into_a_long_silence_once(meeting: Conversation) -> None:
    from polylogue.engine.deployment import FACILITATOR_SILENCE_S

    fac = LiveConversation.start("B", deployment=Deployment.resolve(role="facilitator"))
    plain = LiveConversation.start("B", deployment=Deployment.resolve())
    for live in (fac, plain):
        live.utterance(Utterance("A", "So that's the budget for the remote.", 0.0, 3.0))
        live.utterance(Utterance("C", "Right, and what about the case?", 3.5, 6.0))
    end = 6.0
    assert fac.silence(end + FACILITATOR_SILENCE_S - 0.5) is None  # still a pause
    d = fac.silence(end + FACILITATOR_SILENCE_S + 0.5)
    assert d is not None and d.action is Action.SPEAK and d.reason.startswith("long silence")
    assert fac.silence(end + 3 * FACILITATOR_SILENCE_S) is None  # once per silence
    assert plain.silence(end + 3 * FACILITATOR_SILENCE_S) is None  # only the facilitator
    # A new utterance opens a new silence.
    fac.utterance(Utterance("D", "I think it should be rubber.", 30.0, 32.0))
    again = fac.silence(32.0 + FACILITATOR_SILENCE_S + 1)
    assert again is not None and again.action is Action.SPEAK
    # Not while the agent itself has the floor or just spoke into the silence.
    fac.agent_speech(True, time=40.0)
    assert fac.silence(60.0) is None


def test_serve_role_switch_and_silence_events(tmp_path: Path) -> None:
    with polylogue_serve("--state", str(tmp_path / "s.sqlite")) as url:
        r = httpx.post(
            f"{url}/v1/sessions", json={"agent": "Dave", "deployment": {"role": "facilitator"}}
        )
        assert r.status_code == 201, r.text
        assert r.json()["deployment"]["role"] == "facilitator"
        sid = r.json()["session_id"]

        def send(*events: dict) -> list[dict]:
            res = httpx.post(f"{url}/v1/sessions/{sid}/events", json=list(events), timeout=60)
            assert res.status_code == 200, res.text
            return res.json()["results"]

        first = send(
            {
                "type": "utterance",
                "speaker": "Alice",
                "text": "Dave, can you check the logs?",
                "start": 0.0,
                "end": 2.0,
            },
        )[0]
        assert first["decision"]["action"] == "SPEAK"
        quiet, long = send({"type": "silence", "time": 4.0}, {"type": "silence", "time": 9.0})
        assert "decision" not in quiet
        assert long["decision"]["action"] == "SPEAK" and long["decision"]["reason"].startswith(
            "long silence"
        )
        switched, heard = send(
            {"type": "role", "role": "observer"},
            {
                "type": "utterance",
                "speaker": "Alice",
                "text": "Dave, and the nightly job?",
                "start": 12.0,
                "end": 14.0,
            },
        )
        assert switched["deployment"]["role"] == "observer" and not switched["deployment"]["speaks"]
        assert heard["decision"]["action"] == "SILENT" and heard["decision"]["suggested"] == "SPEAK"
        bad = send({"type": "role", "role": "boss"})[0]
        assert not bad["ok"] and "observer, assistant, facilitator" in bad["error"]


def test_deployments_share_one_loaded_model_until_its_files_change(tmp_path: Path) -> None:
    """``Deployment.resolve`` loads a folder once per process (``load_shared_model``); a
    changed file (a retrained model written over the folder) is loaded again."""
    from polylogue.engine.model import ModelFilesError

    a, b = Deployment.resolve(), Deployment.resolve(role="facilitator")
    assert a.model is b.model
    folder = tmp_path / "model"
    shutil.copytree(DEFAULT_MODEL_DIR, folder)
    first = Deployment.resolve(model_dir=folder).model
    assert first is Deployment.resolve(model_dir=str(folder)).model
    assert first is not a.model  # another folder, another load
    meta = json.loads((folder / "model.json").read_text(encoding="utf-8"))
    meta["threshold"] = 0.123
    (folder / "model.json").write_text(json.dumps(meta), encoding="utf-8")
    again = Deployment.resolve(model_dir=folder).model
    assert again is not first and again.threshold == 0.123
    # load_model always reads afresh (training changes the model it loads).
    assert load_model(folder) is not again
    with pytest.raises(ModelFilesError, match="not a polylogue model folder"):
        Deployment.resolve(model_dir=tmp_path / "missing")
