"""Small writable copies of real shared corpus files, for tests that damage them.

The shared data is read-only; every helper copies (a slice of) real files into ``dest`` in the
corpus' own layout, so a reader sees exactly what it would read from the real folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from polylogue.paths import data_root

AMI_RELEASE = "ami_public_manual_1.6.2"
AMI_MEETING = "ES2008a"
EARNINGS_CALL = "4320211"
ICSI_MEETING = "Bed002"
FRIENDS_CSV = Path("friends-r-package") / "derived_csv" / "friends.csv"
FRIENDS_S10 = Path("character-mining") / "json" / "friends_season_10.json"


def ami_copy(dest: Path, meeting: str = AMI_MEETING) -> Path:
    """One meeting's words and dialogue acts plus the shared resources; returns the release."""
    release = data_root() / "ami" / AMI_RELEASE
    out = dest / AMI_RELEASE
    for sub, pattern in (
        ("words", f"{meeting}.*.words.xml"),
        ("dialogueActs", f"{meeting}.*.dialog-act.xml"),
        ("corpusResources", "meetings.xml"),
        ("ontologies", "da-types.xml"),
    ):
        (out / sub).mkdir(parents=True, exist_ok=True)
        for p in (release / sub).glob(pattern):
            shutil.copy(p, out / sub / p.name)
    return out


def earnings_copy(dest: Path, call: str = EARNINGS_CALL) -> Path:
    """One call's reference and RTTM plus both metadata files; returns the corpus folder."""
    src = data_root() / "earnings21"
    for rel in (
        Path("transcripts") / "nlp_references" / f"{call}.nlp",
        Path("rttms") / f"{call}.rttm",
        Path("speaker-metadata.csv"),
        Path("earnings21-file-metadata.csv"),
    ):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / rel, dest / rel)
    return dest


def friends_csv_head(dest: Path, lines: int = 300) -> Path:
    """The header and first ``lines`` physical lines of the R package's friends.csv."""
    src = data_root() / "friends" / FRIENDS_CSV
    with open(src, encoding="utf-8", newline="") as f:
        head = [next(f) for _ in range(lines + 1)]
    out = dest / "friends.csv"
    out.write_text("".join(head), encoding="utf-8", newline="")
    return out


def friends_s10_episode(dest: Path) -> Path:
    """The season-10 JSON cut to its first episode (same structure as the real file)."""
    src = data_root() / "friends" / FRIENDS_S10
    data = json.loads(src.read_text(encoding="utf-8"))
    data["episodes"] = data["episodes"][:1]
    out = dest / "friends_season_10.json"
    out.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    return out


def icsi_copy(dest: Path, meeting: str = ICSI_MEETING) -> Path:
    """One QMSum ICSI meeting in the corpus layout; returns the corpus folder."""
    rel = Path("data") / "Academic" / "all" / f"{meeting}.json"
    (dest / rel).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(data_root() / "icsi-qmsum" / rel, dest / rel)
    return dest
