"""Friends reader tests on the real shared corpus (``shared/data/friends``)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import pytest

from polylogue.conversation import Conversation, ConversationFormatError, Utterance
from polylogue.corpora import load_corpus
from polylogue.corpora.friends import (
    CSV_PATH,
    GROUP_SPEAKER,
    S10_JSON_PATH,
    FriendsPartMissing,
    display_name,
    is_voice_label,
    participant_for,
    read_friends,
    read_friends_csv,
    read_friends_s10_json,
    resolve_addressees,
    split_notes,
)
from polylogue.paths import corpus_dir


@pytest.fixture(scope="module")
def friends() -> Path:
    return corpus_dir("friends")


@pytest.fixture(scope="module")
def csv_scenes(friends: Path) -> list[Conversation]:
    return list(read_friends(friends, source="csv"))


@pytest.fixture(scope="module")
def s10(friends: Path) -> dict[str, Conversation]:
    return {c.id: c for c in read_friends(friends, source="s10json")}


def _source_id(u: Utterance) -> str:
    """The id of the source line (a line split at "(to X)" notes gives ids "<id>.1", "<id>.2")."""
    return (u.id or "").split(".")[0]


def _utterance(conv: Conversation, uid: str) -> list[Utterance]:
    return [u for u in conv.utterances if _source_id(u) == uid]


# ----------------------------------------------------------------------------- CSV


def test_csv_counts_match_the_file(friends: Path, csv_scenes: list[Conversation]) -> None:
    with open(friends / CSV_PATH, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 60_706  # README
    directions = sum(1 for r in rows if r["speaker"] == "Scene Directions")
    # Lines split at a merged speaker tag ("Maybe. Joey: Wait.") count once.
    utterances = len({_source_id(u) for c in csv_scenes for u in c.utterances})
    kept_directions = sum(len(c.metadata["directions"]) for c in csv_scenes)
    dropped = sum(c.metadata.get("dropped_non_speech_lines", 0) for c in csv_scenes)
    # Every row is accounted for: a spoken utterance, a kept stage direction or a dropped line
    # (directions of scenes without any speech go with their scene).
    scenes_in_file = {(r["season"], r["episode"], r["scene"]) for r in rows}
    assert utterances + dropped == len(rows) - directions
    assert kept_directions <= directions
    assert {c.metadata["season"] for c in csv_scenes} == {1, 2, 3, 4, 5, 6, 7, 8, 10}
    assert len({c.group for c in csv_scenes}) == 212  # README: 212 episodes
    # A few scenes hold only stage directions and give no conversation.
    assert len(scenes_in_file) - 10 <= len(csv_scenes) < len(scenes_in_file)


def test_csv_scene_drops_directions_and_keeps_group_lines(
    csv_scenes: list[Conversation],
) -> None:
    scene = next(c for c in csv_scenes if c.id == "friends_s01e01c01")
    texts = [u.text for u in scene.utterances]
    assert texts[0] == "There's nothing to tell! He's just some guy I work with!"
    assert "(They all stare, bemused.)" not in texts
    assert "[Time Lapse]" not in texts
    assert "(They all stare, bemused.)" in scene.metadata["directions"]
    group = next(u for u in scene.utterances if u.text == "Oh, yeah. Had that dream.")
    assert group.speaker == GROUP_SPEAKER
    assert scene.participant(GROUP_SPEAKER).role == "group"
    assert scene.group == "s01e01" and scene.corpus == "friends" and scene.domain == "tv"
    assert scene.roster_known is False
    assert [p.id for p in scene.participants][:4] == [
        "Monica Geller", "Joey Tribbiani", "Chandler Bing", "Phoebe Buffay",
    ]  # fmt: skip
    assert scene.participant("Monica Geller").name == "Monica"
    assert all(u.addressees is None for u in scene.utterances)  # the CSV lost the notes


def test_csv_inline_direction_is_stripped(csv_scenes: list[Conversation]) -> None:
    scene = next(c for c in csv_scenes if c.id == "friends_s04e16c04")
    (u,) = _utterance(scene, "s04e16c04u071")
    assert u.speaker == "Rachel Green"
    assert "crawls over" not in u.text
    assert u.text.endswith("All right. Who wants to go first?")
    assert u.note is not None and u.note.startswith("(She crawls over")


def test_direction_that_lost_its_opening_bracket_is_a_note(
    csv_scenes: list[Conversation], s10: dict[str, Conversation]
) -> None:
    by_id = {c.id: c for c in csv_scenes}
    # CSV: "So, did you play in college? sweatshirt he's wearing.)"
    (u,) = _utterance(by_id["friends_s04e05c05"], "s04e05c05u017")
    assert (u.text, u.note) == ("So, did you play in college?", "(sweatshirt he's wearing.)")
    # "... Now, don't hold back. and Phoebe picks up a wooden baseball bat and starts to swing
    # as Chandler and Monica enter.)": the direction no longer names Phoebe, Chandler, Monica.
    (u,) = _utterance(by_id["friends_s06e04c18"], "s06e04c18u003")
    assert u.text == "Yeah! Yeah! Yeah! You just take a big, big swing. Now, don't hold back."
    assert u.note is not None and u.note.startswith("(and Phoebe picks up a wooden baseball bat")
    # Season 10 JSON: "(sarcastic) Oh, that is so hot. She walks around him to the other side)"
    (u,) = _utterance(s10["friends_s10e13c09"], "s10_e13_c09_u016")
    assert u.text == "Oh, that is so hot."
    assert u.note == "(sarcastic) (She walks around him to the other side)"
    # A list label is no direction: "Okay, so, question 1) You and uh, you were married ..."
    (u,) = _utterance(by_id["friends_s05e13c11"], "s05e13c11u012")
    assert "question 1) You and uh" in u.text and u.note is None


def test_speaker_tag_residue_is_not_speech(csv_scenes: list[Conversation]) -> None:
    by_id = {c.id: c for c in csv_scenes}
    # Season 1's dropped speaker names left their colons: ": Really? : Sure, we have scones left!"
    (u,) = _utterance(by_id["friends_s01e18c01"], "s01e18c01u005")
    assert u.text == "Really? Sure, we have scones left! OK, read them to me."
    # A tag of another speaker of the scene splits the line: the rest is that speaker's.
    monica, joey = _utterance(by_id["friends_s01e01c02"], "s01e01c02u031")
    assert (monica.speaker, monica.text) == ("Monica Geller", "Maybe.")
    assert (joey.speaker, joey.id) == ("Joey Tribbiani", "s01e01c02u031.2")
    assert joey.text == "Wait. Your 'not a real date' tonight is with Paul the Wine Guy?"
    joey, chandler = _utterance(by_id["friends_s02e15c01"], "s02e15c01u008")  # "chandler:"
    assert (joey.text, chandler.speaker) == ("I know.", "Chandler Bing")
    # After a comma it is a vocative; without such a speaker, a colon of speech.
    (u,) = _utterance(by_id["friends_s01e04c16"], "s01e04c16u001")
    assert u.text == "Okay, Monica: Right foot red."
    (u,) = _utterance(by_id["friends_s08e01c03"], "s08e01c03u070")
    assert u.text == "Funny: Ha-Ha Or Funny"


def test_every_participant_speaks_or_is_addressed(
    csv_scenes: list[Conversation], s10: dict[str, Conversation]
) -> None:
    for conv in [*csv_scenes[:300], *s10.values()]:
        seen = {u.speaker for u in conv.utterances}
        seen |= {a for u in conv.utterances for a in u.addressees or ()}
        assert {p.id for p in conv.participants} == seen, conv.id
        assert all(u.text.strip() for u in conv.utterances)


# ----------------------------------------------------------------------------- season 10 JSON


def test_s10_json_counts(friends: Path, s10: dict[str, Conversation]) -> None:
    data = json.loads((friends / S10_JSON_PATH).read_text(encoding="utf-8"))
    lines = [u for e in data["episodes"] for s in e["scenes"] for u in s["utterances"]]
    assert len(lines) == 5_479  # README
    assert len(s10) == 219 and len({c.group for c in s10.values()}) == 18  # README
    source_ids = {_source_id(u) for c in s10.values() for u in c.utterances}
    with_speech = {u["utterance_id"] for u in lines if u["speakers"] and u["transcript"].strip()}
    assert source_ids == with_speech


def test_s10_text_equals_the_transcript_without_notes(
    friends: Path, s10: dict[str, Conversation]
) -> None:
    data = json.loads((friends / S10_JSON_PATH).read_text(encoding="utf-8"))
    transcript = {
        u["utterance_id"]: u["transcript"]
        for e in data["episodes"]
        for s in e["scenes"]
        for u in s["utterances"]
    }
    joined: dict[str, list[str]] = {}
    for conv in s10.values():
        for u in conv.utterances:
            joined.setdefault(_source_id(u), []).append(u.text)

    def letters(s: str) -> str:
        return "".join(ch for ch in s.lower() if ch.isalnum())

    # EmoryNLP's own note-free transcript has the same words as our segments put together,
    # but for the one direction that lost its "(" (EmoryNLP kept it as speech, we do not).
    differ = {k for k, v in joined.items() if letters(" ".join(v)) != letters(transcript[k])}
    assert differ == {"s10_e13_c09_u016"}
    assert all(
        letters(" ".join(joined[k])) == letters(split_notes(transcript[k])[0]) for k in differ
    )


def test_to_note_sets_addressee_and_splits_the_line(s10: dict[str, Conversation]) -> None:
    before, after = _utterance(s10["friends_s10e02c01"], "s10_e02_c01_u007")
    assert (before.text, before.addressees, before.note) == ("Dude, chill!", None, None)
    assert after.speaker == "Joey Tribbiani"
    assert after.addressees == ("Ross Geller",)
    assert after.note == "(to Ross)"
    assert after.text.startswith("Okay, we also kissed in Barbados")
    assert "(to" not in after.text


def test_multi_addressee_group_and_non_participant_notes(s10: dict[str, Conversation]) -> None:
    (u,) = _utterance(s10["friends_s10e05c09"], "s10_e05_c09_u037")
    assert u.addressees == ("Monica Geller", "Chandler Bing", "Phoebe Buffay")
    assert u.text == "Can any of you watch Emma?"
    (dog,) = _utterance(s10["friends_s10e04c03"], "s10_e04_c03_u102")
    assert dog.addressees == ()  # annotated, but the dog is not a participant
    assert dog.text == "What are you barking at?"
    # "(to mr Zellner)": a misspelling of the scene's speaker "Mr. Zelner".
    _, zelner = _utterance(s10["friends_s10e14c03"], "s10_e14_c03_u017")
    assert zelner.addressees == ("Mr. Zelner",)
    # "(to all)" = everyone who has spoken in the scene so far, never the speaker.
    scene = s10["friends_s10e12c11"]
    to_all = next(u for u in scene.utterances if u.note and "(to all)" in u.note)
    assert to_all.speaker == "Monica Geller"
    assert "Monica Geller" not in (to_all.addressees or ())
    earlier = scene.utterances[: scene.utterances.index(to_all)]
    assert set(to_all.addressees or ()) == {u.speaker for u in earlier} - {
        "Monica Geller", GROUP_SPEAKER,
    }  # fmt: skip


def test_addressee_annotation_volume(s10: dict[str, Conversation]) -> None:
    annotated = [u for c in s10.values() for u in c.utterances if u.addressees is not None]
    resolved = [u for u in annotated if u.addressees]
    # README: 106 lines contain "(to"; a line can carry several notes.
    assert 106 <= len(annotated) <= 200
    assert len(resolved) / len(annotated) > 0.85
    assert all(u.note and "to " in u.note.lower() for u in annotated)


def test_multi_speaker_line_is_a_group_line(s10: dict[str, Conversation]) -> None:
    scene = s10["friends_s10e05c10"]
    u = next(u for u in scene.utterances if u.text == "Hi Ross.")
    assert u.speaker == GROUP_SPEAKER
    assert u.note == "(spoken together by Chandler Bing, Monica Geller)"


def test_all_source_takes_s10_from_json_without_duplicates(
    friends: Path, csv_scenes: list[Conversation], s10: dict[str, Conversation]
) -> None:
    both = list(read_friends(friends, source="all"))
    ids = [c.id for c in both]
    assert len(ids) == len(set(ids))
    by_source = Counter(c.metadata["source"] for c in both)
    assert by_source["s10json"] == len(s10)
    assert by_source["csv"] == sum(1 for c in csv_scenes if c.metadata["season"] != 10)
    assert {c.id for c in both if c.metadata["season"] == 10} == set(s10)


def test_season_filter_and_registry(friends: Path) -> None:
    only2 = list(read_friends(friends, source="csv", seasons=[2]))
    assert only2 and {c.metadata["season"] for c in only2} == {2}
    only10 = list(load_corpus("friends", source="all", seasons=[10]))
    assert only10 and {c.metadata["source"] for c in only10} == {"s10json"}
    assert list(read_friends(friends, source="s10json", seasons=[3])) == []
    with pytest.raises(ValueError, match="source"):
        next(read_friends(friends, source="tsv"))  # type: ignore[arg-type]


def _partial_copy(friends: Path, tmp: Path, csv_seasons: set[str] | None, json: bool) -> Path:
    """A Friends folder with the CSV cut to ``csv_seasons`` (None: no CSV) and/or the JSON."""
    if csv_seasons is not None:
        src_lines = (friends / CSV_PATH).read_text(encoding="utf-8").splitlines(keepends=True)
        keep = [src_lines[0]]
        for row, line in zip(csv.DictReader(src_lines), src_lines[1:], strict=False):
            if row["season"] in csv_seasons:
                keep.append(line)  # rows are single physical lines in this file
        (tmp / CSV_PATH).parent.mkdir(parents=True)
        (tmp / CSV_PATH).write_text("".join(keep), encoding="utf-8")
    if json:
        (tmp / S10_JSON_PATH).parent.mkdir(parents=True)
        (tmp / S10_JSON_PATH).write_bytes((friends / S10_JSON_PATH).read_bytes())
    return tmp


def test_csv_alone_is_a_corpus_and_the_skip_is_reported(
    friends: Path, csv_scenes: list[Conversation], tmp_path: Path
) -> None:
    folder = _partial_copy(friends, tmp_path, {"2", "10"}, json=False)
    with pytest.warns(FriendsPartMissing, match="season 10 is read from the CSV"):
        scenes = list(read_friends(folder))
    expected = [c for c in csv_scenes if c.metadata["season"] in (2, 10)]
    assert [c.id for c in scenes] == [c.id for c in expected]
    assert [len(c.utterances) for c in scenes] == [len(c.utterances) for c in expected]
    assert {c.metadata["source"] for c in scenes} == {"csv"}


def test_json_alone_gives_season_10_and_nothing_is_an_error(
    friends: Path, s10: dict[str, Conversation], tmp_path: Path
) -> None:
    folder = _partial_copy(friends, tmp_path / "json", None, json=True)
    with pytest.warns(FriendsPartMissing, match="seasons 1-8 are skipped"):
        scenes = list(read_friends(folder))
    assert [c.id for c in scenes] == list(s10)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no Friends transcripts"):
        list(read_friends(tmp_path / "empty"))


# ----------------------------------------------------------------------------- helpers


def test_names_and_aliases() -> None:
    assert display_name("Ross Geller") == "Ross"
    assert display_name("Woman No. 1") == "Woman No. 1"
    assert display_name("Mr. Zelner") == "Mr. Zelner"
    assert display_name("Mike's Dad") == "Mike's Dad"
    assert display_name("Gunther") == "Gunther"
    rachel = participant_for("Rachel Green")
    assert rachel.name == "Rachel" and set(rachel.aliases) == {"Rachel Green", "Rach"}


def test_resolve_addressees_rules() -> None:
    scene = ["Ross Geller", "Monica Geller", "Joey Tribbiani"]
    resolve = resolve_addressees
    assert resolve("Joey who has a pizza box", "Ross Geller", scene, [], []) == ("Joey Tribbiani",)
    assert resolve("Ross and Joey", "Monica Geller", scene, [], []) == (
        "Ross Geller", "Joey Tribbiani",
    )  # fmt: skip
    assert resolve("Geller", "Joey Tribbiani", scene, [], []) == ()  # ambiguous surname
    assert resolve("himself", "Joey Tribbiani", scene, [], []) == ()
    assert resolve("Mike", "Joey Tribbiani", scene, ["Mike Hannigan"], []) == ("Mike Hannigan",)
    assert resolve("everybody", "Ross Geller", scene, [], ["Monica Geller", "Ross Geller"]) == (
        "Monica Geller",
    )


def test_split_notes_handles_unclosed_notes() -> None:
    assert split_notes("Okay. (Goes over and fluffs up the pillows") == (
        "Okay.",
        ["(Goes over and fluffs up the pillows"],
    )
    assert split_notes("[Time Lapse]") == ("", ["[Time Lapse]"])


# ----------------------------------------------------------------------------- malformed


def test_malformed_inputs_name_the_file(tmp_path: Path) -> None:
    bad_json = tmp_path / "s10.json"
    bad_json.write_text('{"episodes": [', encoding="utf-8")
    with pytest.raises(ConversationFormatError, match=r"s10\.json:line 1 column \d+: invalid JSON"):
        list(read_friends_s10_json(bad_json))

    not_utf8 = tmp_path / "latin1.json"
    not_utf8.write_bytes('{"episodes": ["Chandler\u00e9"]}'.encode("latin-1"))
    with pytest.raises(ConversationFormatError, match=r"latin1\.json:line 1: not UTF-8 text"):
        list(read_friends_s10_json(not_utf8))

    bad_scene = tmp_path / "scene.json"
    scene = {"scene_id": "episode-one", "utterances": []}
    bad_scene.write_text(json.dumps({"episodes": [{"scenes": [scene]}]}), encoding="utf-8")
    with pytest.raises(ConversationFormatError, match="episode-one"):
        list(read_friends_s10_json(bad_scene))

    no_cols = tmp_path / "friends.csv"
    no_cols.write_text("text,speaker\nHi,Ross\n", encoding="utf-8")
    with pytest.raises(ConversationFormatError, match="missing columns"):
        list(read_friends_csv(no_cols))

    bad_key = tmp_path / "key.csv"
    bad_key.write_text(
        "text,speaker,season,episode,scene,utterance\nHi,Ross Geller,one,1,1,1\n",
        encoding="utf-8",
    )
    with pytest.raises(ConversationFormatError, match=r"key\.csv:line 2"):
        list(read_friends_csv(bad_key))


def _build_cli(data: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``polylogue build --corpus friends`` on ``data``, stderr piped, no COLUMNS set."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "polylogue"),
            "build",
            "--corpus",
            "friends",
            "--data-root",
            str(data),
            "--limit-conversations",
            "3",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_build_cli_says_what_was_skipped_in_one_line(friends: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    _partial_copy(friends, data / "friends", {"10"}, json=False)
    proc = _build_cli(data, tmp_path / "bench")
    assert proc.returncode == 0, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if "season 10 is read from the CSV" in x]
    assert len(lines) == 1 and lines[0].startswith("warning: ")
    assert "warnings.warn" not in proc.stderr


def test_build_of_a_csv_without_season_10_does_not_warn_about_it(
    friends: Path, tmp_path: Path
) -> None:
    """A held-out season's folder (here season 2 alone; the shared CSV has no season 9) has
    nothing to lose without the season-10 JSON: no warning about season 10."""
    data = tmp_path / "data"
    _partial_copy(friends, data / "friends", {"2"}, json=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FriendsPartMissing)
        scenes = list(read_friends(data / "friends"))
    assert scenes and {c.metadata["season"] for c in scenes} == {2}
    proc = _build_cli(data, tmp_path / "bench")
    assert proc.returncode == 0, proc.stderr
    assert "season 10" not in proc.stderr and "warning" not in proc.stderr


# ----------------------------------------------------------------------------- voices

#: Every label of the shared seasons the earlier word list marked as a voice (it matched "tv",
#: "radio", "machine", "tape", "intercom", "commercial", "narrator", "voice", "announcer" or
#: "recording"): the rule keeps them all.
OLD_LIST_VOICES = {
    "Announcer", "Machine", "Hold Voice", "Voice", "Intercom", "Hypnosis Tape", "Man On Tv",
    "Woman On Tv", "Radio", "Tv Announcer", "Gary's Radio", "Answering Machine",
    "Janice's Voice", "Tape", "Priest On Tv", "Soothing Male Voice", "Tv Doctor",
    "Girl's Voice", "Woman's Voice", "Commercial", "Man's Voice", "Another Man's Voice",
    "Same Man's Voice", "Narrator", "A Disembodied Voice",
}  # fmt: skip


def test_voice_labels_by_what_they_are_made_of(csv_scenes: list[Conversation]) -> None:
    labels = {u.speaker for c in csv_scenes for u in c.utterances}
    voices = {x for x in labels if is_voice_label(x)}
    assert voices >= OLD_LIST_VOICES
    # Sound sources the word list missed: an announcement, a news anchor, sounding devices.
    assert voices - OLD_LIST_VOICES == {"Announcement", "Anchorwoman", "Smoke Detector", "Oven"}
    # Labels a season outside the shared ones may use: medium, voice head, broadcaster, device.
    for label in (
        "Phone Voice", "Woman On Tape", "TV Announcer", "Voice On Intercom", "Radio DJ",
        "Newscaster", "Computer Voice", "Recorded Message", "Ross (V.O.)", "Voice Over",
        "Sportscaster", "Loudspeaker", "Car Alarm",
    ):  # fmt: skip
        assert is_voice_label(label), label
    # People, including one on the phone (they hear and answer) and one on a bus.
    for label in ("Woman On Phone", "Girl 1 On Bus", "Woman On Train", "Host", "Ross Geller"):
        assert not is_voice_label(label), label
        assert participant_for(label).role is None


def test_benchmark_voices_are_the_rules_voices(csv_scenes: list[Conversation]) -> None:
    # The benchmark (format 6 on) marks exactly the rule's voices as never-present speakers.
    labels = {u.speaker for c in csv_scenes for u in c.utterances}
    benchmark_voices = {x for x in labels if participant_for(x).role == "voice"}
    assert benchmark_voices == {x for x in labels if is_voice_label(x)}
    assert benchmark_voices >= OLD_LIST_VOICES
