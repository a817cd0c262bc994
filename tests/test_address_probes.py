"""The address probes (benchmarks/probes): every record well formed, both test probes frozen.

* Every record of both probes follows the format of benchmarks/probes/README.md: the agent and
  every speaker are participants, the last line is not the agent's, the expected addressees
  are participants (or the room), the verdict agrees with the shape, the lines are in
  recognizer style, a misheard spelling is closer to the name it stands for than to any other
  roster name.
* Ids are unique across the probes and no roster name of one probe appears in another.
* Each test probe's SHA-256 is the one the README records, so any edit to it shows.
* The README's count tables equal the counts of the files, and the distribution they document
  holds (at least 220 scenarios in the first test probe and 240 in the second, every shape at
  least 8 times, about half addressed, about a third two-person; in the second, at least 48
  misheard names, about half of them beside another close roster name).
* No roster name is a speaker name of the shared corpora (check_names.py, run on the real
  corpora), and the README quotes no line of the test probe.

No model is scored here: the benchmark does that.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from polylogue.paths import data_root

ROOT = Path(__file__).resolve().parents[1]
PROBES = ROOT / "benchmarks" / "probes"
TEST_PROBE = PROBES / "address_test.jsonl"
DEV_PROBE = PROBES / "address_dev.jsonl"
TEST2_PROBE = PROBES / "address_test2.jsonl"
README = PROBES / "README.md"

ADDRESSING = frozenset(
    {
        "vocative-start",
        "vocative-verb",
        "vocative-middle",
        "vocative-end",
        "vocative-after-thanks",
        "follow-up-you",
        "vocative-after-greeting",
        "vocative-alone",
        "vocative-alias",
        "near-miss",
        "two-person-unnamed",
    }
)
NOT_ADDRESSING = frozenset(
    {
        "addressed-to-another",
        "third-person",
        "common-word",
        "generic-you",
        "group",
        "near-miss-other",
        "aside",
        "between-others",
    }
)
TWO_PERSON_ONLY = frozenset({"two-person-unnamed", "aside"})
FIELDS = frozenset(
    {"id", "kind", "domain", "source", "agent", "participants", "lines", "addressed",
     "addressees", "shape", "two_person", "misheard"}
)  # fmt: skip
KINDS = frozenset({"meeting", "call", "chat-call"})
DOMAINS = frozenset({"meeting", "tv", "earnings"})
# Lower-case words (letters, digits, apostrophes) joined by one space or a hyphen ("mm-hmm").
RECOGNIZER_TEXT = re.compile(r"[a-z0-9']+(?:[ -][a-z0-9']+)*")
BACKCHANNELS = frozenset({"mm-hmm", "yeah"})


def _load(path: Path) -> list[dict[str, Any]]:
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            pytest.fail(f"{path.name} line {n}: not JSON: {exc}")
    return records


@pytest.fixture(scope="module")
def probes() -> dict[str, list[dict[str, Any]]]:
    return {"test": _load(TEST_PROBE), "dev": _load(DEV_PROBE), "test2": _load(TEST2_PROBE)}


def _edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _names(participant: dict[str, Any]) -> list[str]:
    return [participant["name"], *participant.get("aliases", [])]


def _problems(rec: dict[str, Any]) -> list[str]:
    """What is wrong with one record (empty when it follows the format)."""
    out: list[str] = []
    if set(rec) != FIELDS:
        return [f"fields {sorted(set(rec) ^ FIELDS)} missing or unexpected"]
    if rec["kind"] not in KINDS:
        out.append(f"kind {rec['kind']!r}")
    if rec["domain"] not in DOMAINS:
        out.append(f"domain {rec['domain']!r}")
    if rec["source"] != {"corpus": "written-probe"}:
        out.append(f"source {rec['source']!r}")
    people = rec["participants"]
    ids = [p.get("id") for p in people]
    if len(set(ids)) != len(ids) or not 2 <= len(ids) <= 6:
        out.append(f"participant ids {ids}: unique, 2 to 6")
    for p in people:
        if not (isinstance(p.get("name"), str) and p["name"]) or not isinstance(p["id"], str):
            out.append(f"participant {p!r} needs an id and a name")
        if not all(isinstance(a, str) and a for a in p.get("aliases", [])):
            out.append(f"participant {p['id']}: aliases {p.get('aliases')!r}")
    agent = rec["agent"]
    if agent not in ids:
        out.append(f"agent {agent!r} is not a participant")
    lines = rec["lines"]
    if not 3 <= len(lines) <= 9:
        out.append(f"{len(lines)} lines: 2 to 8 of context and the decision line")
    for line in lines:
        if line.get("speaker") not in ids:
            out.append(f"speaker {line.get('speaker')!r} is not a participant")
        if not RECOGNIZER_TEXT.fullmatch(line.get("text", "")):
            out.append(f"not recognizer style: {line.get('text')!r}")
    last = lines[-1]
    if last["speaker"] == agent:
        out.append("the last line is the agent's")
    addressees = rec["addressees"]
    if addressees != ["@group"] and (
        not set(addressees) <= set(ids) or len(set(addressees)) != len(addressees)
    ):
        out.append(f"addressees {addressees} are not participants or ['@group']")
    if last["speaker"] in addressees:
        out.append("the last speaker addresses themself")
    if rec["addressed"] is not (agent in addressees):
        out.append(f"addressed={rec['addressed']} but addressees={addressees}")
    shape = rec["shape"]
    if shape not in ADDRESSING | NOT_ADDRESSING:
        out.append(f"unknown shape {shape!r}")
    elif rec["addressed"] is not (shape in ADDRESSING):
        out.append(f"shape {shape} with addressed={rec['addressed']}")
    if rec["two_person"] is not (len(ids) == 2):
        out.append(f"two_person={rec['two_person']} with {len(ids)} participants")
    if shape in TWO_PERSON_ONLY and not rec["two_person"]:
        out.append(f"{shape} is a two-person shape")
    if shape == "group" and addressees != ["@group"]:
        out.append("a group question addresses the room")
    if shape == "aside" and addressees:
        out.append("an aside addresses nobody on the call")
    if shape == "addressed-to-another" and not _right_after_the_agent(lines, agent, 3):
        out.append("addressed-to-another: right after the agent (at most a short reaction)")
    if shape == "follow-up-you" and not (
        _right_after_the_agent(lines, agent, 3)
        and all(line["text"] in BACKCHANNELS for line in _after_the_agent(lines, agent))
        and _after_the_agent(lines, agent)
    ):
        out.append("follow-up-you: the agent, only backchannels, then the question")
    out += _misheard_problems(rec)
    return out


def _after_the_agent(lines: list[dict[str, str]], agent: str) -> list[dict[str, str]]:
    """The lines between the agent's last line and the decision line."""
    said = [i for i, line in enumerate(lines[:-1]) if line["speaker"] == agent]
    return lines[said[-1] + 1 : -1] if said else lines[:-1]


def _right_after_the_agent(lines: list[dict[str, str]], agent: str, within: int) -> bool:
    """The agent spoke one of the `within` lines before the last, and only reactions of at
    most three words ("ouch", "oh no", "mm-hmm") came between."""
    between = _after_the_agent(lines, agent)
    return any(line["speaker"] == agent for line in lines[-1 - within : -1]) and all(
        len(line["text"].split()) <= 3 for line in between
    )


def _misheard_problems(rec: dict[str, Any]) -> list[str]:
    misheard = rec["misheard"]
    near = rec["shape"] in {"near-miss", "near-miss-other"}
    if misheard is None:
        return ["a near-miss needs misheard"] if near else []
    if not near:
        return [f"misheard in a {rec['shape']} scenario"]
    heard, name = misheard.get("heard", ""), misheard.get("name", "")
    owners = [p for p in rec["participants"] if name in _names(p)]
    if not owners:
        return [f"misheard name {name!r} is not a roster name"]
    owner = owners[0]["id"]
    out: list[str] = []
    if f" {heard} " not in f" {rec['lines'][-1]['text']} ":
        out.append(f"the last line does not say {heard!r}")
    if heard == name.lower():
        out.append(f"{heard!r} is the name itself")
    if (owner == rec["agent"]) is not (rec["shape"] == "near-miss"):
        out.append(f"misheard {name} in a {rec['shape']} scenario")
    if rec["shape"] == "near-miss-other" and rec["addressees"] != [owner]:
        out.append(f"the misheard name addresses {owner}")
    spelt = heard.replace(" ", "")
    own = _edit_distance(spelt, name.lower().replace(" ", ""))
    for p in rec["participants"]:
        for other in _names(p):
            if other != name and _edit_distance(spelt, other.lower().replace(" ", "")) <= own:
                out.append(f"{heard!r} is as close to {other} as to {name}")
    return out


@pytest.mark.parametrize("probe", ["test", "dev", "test2"])
def test_every_record_follows_the_format(
    probes: dict[str, list[dict[str, Any]]], probe: str
) -> None:
    bad = {
        r.get("id", f"line {n}"): p for n, r in enumerate(probes[probe], 1) if (p := _problems(r))
    }
    assert not bad, f"{probe} probe: {json.dumps(bad, indent=1)}"


def test_ids_are_unique_across_the_probes(probes: dict[str, list[dict[str, Any]]]) -> None:
    ids = Counter(r["id"] for recs in probes.values() for r in recs)
    assert [i for i, n in ids.items() if n > 1] == []
    assert all(r["id"].startswith(f"{name}-") for name, recs in probes.items() for r in recs)


def _roster_words(records: list[dict[str, Any]]) -> set[str]:
    words: set[str] = set()
    for rec in records:
        for p in rec["participants"]:
            for text in (p["id"].replace("_", " "), *_names(p)):
                words |= set(text.lower().split())
    return words


def test_no_roster_name_repeats_across_the_probes(
    probes: dict[str, list[dict[str, Any]]],
) -> None:
    words = {name: _roster_words(recs) for name, recs in probes.items()}
    shared = {f"{a}/{b}": sorted(words[a] & words[b]) for a in words for b in words if a < b}
    assert shared == {pair: [] for pair in shared}


@pytest.mark.parametrize("probe", [TEST_PROBE, TEST2_PROBE], ids=["test", "test2"])
def test_the_test_probe_is_frozen(probe: Path) -> None:
    recorded = re.search(rf"SHA-256 of `{probe.name}`: `([0-9a-f]{{64}})`", README.read_text())
    assert recorded, f"the README records the SHA-256 of {probe.name}"
    assert hashlib.sha256(probe.read_bytes()).hexdigest() == recorded.group(1), (
        f"{probe.name} changed: a test probe is frozen"
    )


def _readme_tables(column: str = "test") -> dict[str, dict[str, list[str]]]:
    """The README's count tables with a `column` column (`test` for the tables of the first
    test and development probes, `test2` for the second test probe's) by their first header
    cell: {first cell of a row: the other cells}."""
    tables: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for line in README.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if current is None:
            current = tables.setdefault(cells[0], {}) if column in cells else {}
        elif not set(cells[0]) <= {"-", ":"}:
            current[cells[0]] = cells[1:]
    return tables


@pytest.mark.parametrize(
    ("column", "names"), [("test", ("test", "dev")), ("test2", ("test2",))], ids=["first", "second"]
)
def test_the_readme_counts_are_the_files_counts(
    probes: dict[str, list[dict[str, Any]]], column: str, names: tuple[str, ...]
) -> None:
    tables = _readme_tables(column)
    probes = {name: probes[name] for name in names}
    shapes = tables["shape"]
    computed: dict[str, list[str]] = {}
    for shape in sorted(ADDRESSING | NOT_ADDRESSING):
        cells = ["yes" if shape in ADDRESSING else "no"]
        for recs in probes.values():
            of = [r for r in recs if r["shape"] == shape]
            cells += [str(len(of)), str(sum(r["two_person"] for r in of))]
        computed[shape] = cells
    totals = [str(f(recs)) for recs in probes.values() for f in (len, _two)]
    computed["**all**"] = ["", *totals]
    assert shapes == computed
    for field in ("kind", "domain", "addressed", "two_person"):
        counts = {
            ("yes" if value else "no") if isinstance(value, bool) else value: [
                str(Counter(r[field] for r in recs)[value]) for recs in probes.values()
            ]
            for value in {r[field] for recs in probes.values() for r in recs}
        }
        assert tables[field] == counts, field


def _two(records: list[dict[str, Any]]) -> int:
    return sum(r["two_person"] for r in records)


def test_the_documented_distribution_holds(probes: dict[str, list[dict[str, Any]]]) -> None:
    test, dev = probes["test"], probes["dev"]
    assert len(test) >= 220
    assert 130 <= len(dev) <= 170
    shapes = Counter(r["shape"] for r in test)
    assert set(shapes) == ADDRESSING | NOT_ADDRESSING
    assert min(shapes.values()) >= 8, shapes
    assert set(Counter(r["shape"] for r in dev)) == set(shapes)
    for recs in (test, dev):
        assert 0.45 <= sum(r["addressed"] for r in recs) / len(recs) <= 0.55
        assert 0.3 <= _two(recs) / len(recs) <= 0.36


def _edit_gap(rec: dict[str, Any], participant: str) -> int:
    """How many more edits the misheard spelling is from `participant`'s nearest name or alias
    than from the name it stands for."""
    heard = rec["misheard"]["heard"].replace(" ", "")
    own = _edit_distance(heard, rec["misheard"]["name"].lower().replace(" ", ""))
    (p,) = [p for p in rec["participants"] if p["id"] == participant]
    return min(_edit_distance(heard, n.lower().replace(" ", "")) for n in _names(p)) - own


def test_the_second_test_probe_distribution_holds(
    probes: dict[str, list[dict[str, Any]]],
) -> None:
    test2 = probes["test2"]
    assert len(test2) >= 240
    shapes = Counter(r["shape"] for r in test2)
    assert set(shapes) == ADDRESSING | NOT_ADDRESSING
    assert min(shapes.values()) >= 8, shapes
    assert 0.45 <= sum(r["addressed"] for r in test2) / len(test2) <= 0.55
    assert 0.3 <= _two(test2) / len(test2) <= 0.36
    misheard = [r for r in test2 if r["misheard"]]
    assert len(misheard) >= 48
    # Beside a close name: the agent's own, at most two edits further, in every near-miss-other;
    # another participant's, at most one edit further, in some near-misses. About half.
    others = [r for r in misheard if r["shape"] == "near-miss-other"]
    assert all(_edit_gap(r, r["agent"]) <= 2 for r in others)
    close = [
        r
        for r in misheard
        if r["shape"] == "near-miss"
        and min(_edit_gap(r, p["id"]) for p in r["participants"] if p["id"] != r["agent"]) <= 1
    ]
    assert 0.4 <= (len(others) + len(close)) / len(misheard) <= 0.6, (len(others), len(close))
    # The scenes the README names: earnings calls and voice chats among players.
    assert Counter(r["domain"] for r in test2)["earnings"] >= 12
    assert Counter(r["kind"] for r in test2)["chat-call"] >= 8


def test_no_roster_name_is_a_shared_corpus_speaker() -> None:
    script = PROBES / "check_names.py"
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            str(data_root()),
            str(TEST_PROBE),
            str(DEV_PROBE),
            str(TEST2_PROBE),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 collisions" in done.stdout
    # The check did read the corpora: Friends' and Earnings-21's names are hundreds of words.
    counts = re.search(r"'friends': (\d+), 'earnings21': (\d+)", done.stdout)
    assert counts and min(int(n) for n in counts.groups()) > 100, done.stdout


def test_the_readme_quotes_no_test_probe_line(probes: dict[str, list[dict[str, Any]]]) -> None:
    readme = README.read_text(encoding="utf-8")
    quoted = [
        line["text"]
        for rec in probes["test"] + probes["test2"]
        for line in rec["lines"]
        if len(line["text"].split()) >= 4 and line["text"] in readme
    ]
    assert quoted == []
