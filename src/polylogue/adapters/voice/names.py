"""Roster names as pocketsphinx words: espeak-ng's phonemes mapped to the ARPAbet phones of
pocketsphinx's acoustic model (a letter-by-letter guess when espeak-ng is missing), and the
roster's names and aliases as the words a recognizer is told to expect."""

from __future__ import annotations

import re
from collections.abc import Iterable

from polylogue.adapters.voice.audio import VoiceError
from polylogue.adapters.voice.synthesis import espeak_path, run_espeak
from polylogue.conversation import Participant

# espeak-ng IPA → the acoustic model's ARPAbet phones (longest symbols first).
_IPA = {
    "tʃ": "CH",
    "dʒ": "JH",
    "eɪ": "EY",
    "aɪ": "AY",
    "ɔɪ": "OY",
    "aʊ": "AW",
    "oʊ": "OW",
    "əʊ": "OW",
    "ɑː": "AA",
    "ɔː": "AO",
    "oː": "AO",
    "iː": "IY",
    "uː": "UW",
    "ɜː": "ER",
    "ɚ": "ER",
    "ɝ": "ER",
    "ɪ": "IH",
    "i": "IY",
    "e": "EH",
    "ɛ": "EH",
    "æ": "AE",
    "a": "AA",
    "ɑ": "AA",
    "ɒ": "AA",
    "ɔ": "AO",
    "o": "OW",
    "ʊ": "UH",
    "u": "UW",
    "ʌ": "AH",
    "ə": "AH",
    "ɐ": "AH",
    "ᵻ": "IH",
    "b": "B",
    "d": "D",
    "f": "F",
    "ɡ": "G",
    "g": "G",
    "h": "HH",
    "j": "Y",
    "k": "K",
    "l": "L",
    "m": "M",
    "n": "N",
    "ŋ": "NG",
    "p": "P",
    "ɹ": "R",
    "r": "R",
    "s": "S",
    "ʃ": "SH",
    "t": "T",
    "θ": "TH",
    "ð": "DH",
    "v": "V",
    "w": "W",
    "z": "Z",
    "ʒ": "ZH",
    "ɾ": "T",
    "x": "K",
}
_IPA_KEYS = sorted(_IPA, key=len, reverse=True)
# A letter-by-letter guess when espeak-ng is missing (crude, and said so in the docs).
_LETTERS = dict(
    zip(
        "abcdefghijklmnopqrstuvwxyz",
        [
            "AE",
            "B",
            "K",
            "D",
            "EH",
            "F",
            "G",
            "HH",
            "IH",
            "JH",
            "K",
            "L",
            "M",
            "N",
            "AA",
            "P",
            "K",
            "R",
            "S",
            "T",
            "AH",
            "V",
            "W",
            "K_S",
            "IY",
            "Z",
        ],
        strict=True,
    )
)


def ipa_to_arpabet(ipa: str) -> list[str]:
    phones: list[str] = []
    i = 0
    while i < len(ipa):
        for k in _IPA_KEYS:
            if ipa.startswith(k, i):
                phones.append(_IPA[k])
                i += len(k)
                break
        else:
            i += 1  # stress marks, length marks, syllable breaks
    return phones


def pronounce(word: str) -> list[str]:
    """ARPAbet phones for ``word``: espeak-ng's American English phonemes mapped, else a
    letter-by-letter guess."""
    if espeak_path() is not None:
        try:
            out = run_espeak(["-q", "--ipa", "-v", "en-us"], word)
        except VoiceError as e:
            raise VoiceError(f"the roster name {word!r}: {e}") from None
        phones = ipa_to_arpabet(out.decode("utf-8", "replace").strip())
        if phones:
            return phones
    return [ph for c in word.lower() if c in _LETTERS for ph in _LETTERS[c].split("_")]


def hint_words(participants: Iterable[Participant]) -> list[str]:
    """The roster's names and aliases as recognizer words (lower case, one word each)."""
    words: list[str] = []
    for p in participants:
        if p.id.upper() == "ALL":  # a chorus line (Friends' "ALL") names no one
            continue
        for label in (p.id, p.name, *p.aliases):
            for w in re.findall(r"[a-z']+", (label or "").lower()):
                if len(w) > 1 and w not in words:
                    words.append(w)
    return words


def hint_names(participants: Iterable[Participant]) -> list[str]:
    """The roster's names and aliases as people say them (capitalised, whole), for a
    recognizer that reads a prompt (Whisper): ids that are no words (``p1``) left out."""
    out: list[str] = []
    for p in participants:
        if p.id.upper() == "ALL":
            continue
        labels = [p.name, *p.aliases] if p.name else [p.id, *p.aliases]
        for label in labels:
            label = (label or "").strip()
            wordlike = re.search(r"[A-Za-z]{2,}", label) and not re.search(r"\d", label)
            if wordlike and label not in out:
                out.append(label)
    return out


__all__ = ["hint_names", "hint_words", "ipa_to_arpabet", "pronounce"]
