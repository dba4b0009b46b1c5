"""Captions cut into sentences, and any character span of a caption mapped onto its CLIP token positions.

**The sentence splitter** (deterministic, no model): a sentence ends at a run of ``.``, ``!`` or ``?``,
optionally followed by closing quotes or brackets, when whitespace or the end of the caption follows.
No split after a known abbreviation ("e.g.", "Mr.", "approx." ... see ``ABBREVIATIONS``) or a single
letter (an initial, "U.S."). Text after the last terminator is a sentence of its own; whitespace around
sentences is not part of them; empty pieces are dropped. GOAL's preprocessing splits on every ``.``
(``text.split('.')``), which also cuts "3.5 m" and "e.g. a dog" in two; ours never splits inside a
token, so every sentence is a whole number of CLIP tokens of the caption (the span logic below relies
on that).

**Token spans.** Positions are those of the caption as :func:`hnclip.models.tokenize` lays it out:
``<start_of_text>`` at 0, then one position per BPE token. CLIP's tokenizer cuts the cleaned text
into pieces with one regex and encodes each piece on its own, so the tokens of a character range are
those of the regex pieces inside it. :func:`token_offsets` replays that regex on the raw caption to
give each token its character range, and checks the result against the tokenizer's own encoding (the
tokenizer's cleaning, ftfy and whitespace folding, could in principle move characters); where they
disagree it falls back to encoding prefixes, exact at piece boundaries and slower. Spans are not
clipped to a context length here: the caller knows it (a long caption's tail is truncated away).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["ABBREVIATIONS", "Sentence", "char_span_to_tokens", "split_sentences", "token_offsets"]

# Kept short: a word here that also ends sentences ("in.", "no.", "etc.") would merge two sentences.
ABBREVIATIONS = frozenset({
    "e.g", "i.e", "vs", "approx", "cf", "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "fig", "inc",
    "ltd", "mt", "lbs", "oz",
})
# terminator run, then closing quotes/brackets, then whitespace or the end
_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?=\s|$)")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)$")


@dataclass(frozen=True)
class Sentence:
    """``text == caption[start:end]``: no surrounding whitespace, terminator included."""

    text: str
    start: int
    end: int


def _is_abbreviation(caption: str, terminator_start: int) -> bool:
    match = _WORD_BEFORE.search(caption[:terminator_start])
    if match is None:
        return False
    word = match.group(1).lower()
    if word in ABBREVIATIONS:
        return True
    # an initial ("J. Smith") or a dotted acronym's last letter ("U.S.", "e.g." caught above)
    return len(word.replace(".", "")) <= 1 or bool(re.fullmatch(r"(?:[a-z]\.)+[a-z]", word))


def split_sentences(caption: str) -> list[Sentence]:
    """The caption's sentences in order, with their character spans (see the module docstring)."""
    sentences = []
    begin = 0
    for match in _END.finditer(caption):
        if caption[match.start()] == "." and match.end() - match.start() == 1 \
                and _is_abbreviation(caption, match.start()):
            continue
        sentences.append(_trimmed(caption, begin, match.end()))
        begin = match.end()
    sentences.append(_trimmed(caption, begin, len(caption)))
    return [s for s in sentences if s is not None]


def _trimmed(caption: str, start: int, end: int) -> Sentence | None:
    piece = caption[start:end]
    stripped = piece.strip()
    if not stripped:
        return None
    start += len(piece) - len(piece.lstrip())
    return Sentence(stripped, start, start + len(stripped))


@lru_cache(maxsize=1)
def _tokenizer():
    from hnclip.models.tokenizer import _tokenizer as shared  # one BPE table per process

    return shared()


def token_offsets(caption: str) -> list[tuple[int, int]]:
    """Character range ``[start, end)`` in ``caption`` of each BPE token (SOT/EOT not included).

    Token ``k`` sits at position ``k + 1`` of the tokenized caption.
    """
    tokenizer = _tokenizer()
    offsets: list[tuple[int, int]] = []
    ids: list[int] = []
    for match in tokenizer.pat.finditer(caption):  # the pattern ignores case; pieces are lowered below
        piece = "".join(tokenizer.byte_encoder[b] for b in match.group(0).lower().encode("utf-8"))
        pieces = tokenizer.bpe(piece).split(" ")
        ids.extend(tokenizer.encoder[p] for p in pieces)
        offsets.extend([(match.start(), match.end())] * len(pieces))
    if ids == tokenizer.encode(caption):
        return offsets
    return _offsets_by_prefix(caption)


def _offsets_by_prefix(caption: str) -> list[tuple[int, int]]:
    """Slow exact fallback: token k belongs to the shortest prefix whose encoding has more than k tokens."""
    encode = _tokenizer().encode
    offsets: list[tuple[int, int]] = []
    previous_end = 0
    for end in range(1, len(caption) + 1):
        if end < len(caption) and not caption[end].isspace():
            continue  # cut only at whitespace, where pieces of the prefix and the whole caption agree
        count = len(encode(caption[:end]))
        offsets.extend([(previous_end, end)] * (count - len(offsets)))
        previous_end = end
    return offsets


def char_span_to_tokens(offsets: list[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    """Positions ``[first, last)`` (SOT = 0) of the tokens whose characters overlap ``[start, end)``.

    An empty result is ``(p, p)``. Positions may exceed a model's context length. Offsets are sorted
    (tokens follow the text), so both ends are binary searches: StructXLIP maps ~64 chunks per caption.
    """
    first = bisect.bisect_right(offsets, start, key=lambda o: o[1])  # first token ending after start
    stop = bisect.bisect_left(offsets, end, key=lambda o: o[0])  # first token starting at or after end
    if first >= stop:
        position = 1 + bisect.bisect_left(offsets, start, key=lambda o: o[0])
        return position, position
    return first + 1, stop + 1
