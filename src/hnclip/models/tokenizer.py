"""CLIP's BPE tokenizer (ships inside open_clip, so it works offline), shared by every model."""

from __future__ import annotations

from functools import lru_cache

import torch
from open_clip.tokenizer import SimpleTokenizer

__all__ = ["EOT_TOKEN_ID", "SOT_TOKEN_ID", "describe_truncation", "log_truncation", "token_counts", "tokenize",
           "truncation"]


@lru_cache(maxsize=1)
def _tokenizer() -> SimpleTokenizer:
    # built once per process: reading the 49k BPE merges takes ~0.3 s, and keeping it off the model
    # keeps deepcopy/pickle of models cheap. Its encode is memoised per text (a training job reads the same
    # captions several times: its tokens, the truncation count, each evaluation) and, below that, per word
    # (:func:`_encode_by_word`). SimpleTokenizer.__call__ copies what encode returns, so the cached lists are
    # never modified.
    tokenizer = SimpleTokenizer()
    tokenizer.encode = lru_cache(maxsize=None)(_encode_by_word(tokenizer))
    return tokenizer


def _encode_by_word(tokenizer: SimpleTokenizer):
    """``tokenizer.encode`` with each word's ids memoised: the same ids, a fraction of the time.

    SimpleTokenizer.encode cleans the text, splits it with its regex and maps every piece to BPE ids one at
    a time; its own cache holds each piece's merged string but not its ids, so the byte mapping and the
    dictionary lookups run again for every word of every caption. Dense captions repeat a small vocabulary
    (a 5,000-caption split is ~650k words of a few hundred kinds): 2.3 s per 5,000 captions, paid by each
    job that evaluates a split, became ~0.5 s. Same cleaning, same split, same pieces: the ids are
    identical (tests/test_tokenizer_words.py compares with open_clip's own encode).
    """
    ids_of_word: dict[str, list[int]] = {}
    pattern, clean = tokenizer.pat, tokenizer.clean_fn
    byte_encoder, encoder, bpe = tokenizer.byte_encoder, tokenizer.encoder, tokenizer.bpe

    def encode(text: str) -> list[int]:
        ids: list[int] = []
        for word in pattern.findall(clean(text)):
            known = ids_of_word.get(word)
            if known is None:
                symbols = "".join(byte_encoder[b] for b in word.encode("utf-8"))
                known = ids_of_word[word] = [encoder[piece] for piece in bpe(symbols).split(" ")]
            ids.extend(known)
        return ids

    return encode


SOT_TOKEN_ID = 49406
EOT_TOKEN_ID = 49407


def tokenize(texts: list[str] | str, context_length: int) -> torch.LongTensor:
    """[B, context_length] token ids, zero-padded; too-long captions are truncated keeping EOT last.

    EOT is the largest id in CLIP's vocabulary, which is why models pool at ``argmax`` of the ids.
    """
    if isinstance(texts, str):
        texts = [texts]
    return _tokenizer()(list(texts), context_length=context_length)


def token_counts(texts: list[str]) -> list[int]:
    """Positions each text needs before truncation: its BPE tokens plus SOT and EOT (what :func:`tokenize`
    writes when they fit; it keeps the first ``context_length - 1`` and EOT when they do not)."""
    encode = _tokenizer().encode
    return [len(encode(text)) + 2 for text in texts]


def truncation(texts: list[str], context_length: int) -> dict:
    """How many of ``texts`` :func:`tokenize` cuts at ``context_length``: ``{"count", "captions", "share",
    "context_length", "longest"}`` (longest: the most positions one text needs).

    Long captions are the paper's subject, and a cut caption trains and is evaluated on its first
    ``context_length - 2`` tokens only, without an error: the prepare log and the run's summary say how many.
    """
    counts = token_counts(texts)
    cut = sum(1 for n in counts if n > context_length)
    return {"count": cut, "captions": len(counts), "share": cut / len(counts) if counts else 0.0,
            "context_length": int(context_length), "longest": max(counts, default=0)}


def describe_truncation(report: dict, what: str) -> str:
    """One log line for :func:`truncation`'s ``report`` of ``what`` (e.g. ``"synthetic/train"``)."""
    return (f"{what}: {report['count']} of {report['captions']} captions ({100 * report['share']:.1f}%) are longer "
            f"than the text tower's {report['context_length']} positions and are cut there (the longest needs "
            f"{report['longest']})")


def log_truncation(texts: list[str], context_length: int, what: str, log) -> dict:
    """:func:`truncation` of ``texts``, logged on ``log`` as one line (a warning when any is cut) and returned."""
    report = truncation(texts, context_length)
    (log.warning if report["count"] else log.info)(describe_truncation(report, what))
    return report
