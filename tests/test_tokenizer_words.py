"""The tokenizer's per-word memo (hnclip.models.tokenizer._encode_by_word) against open_clip's own encode."""

from __future__ import annotations

import random

import pytest


def _captions(n: int) -> list[str]:
    from hnclip.data.synthetic import describe_scene
    from hnclip.data.synthetic.scenes import iter_scenes

    scenes = [scene for _, _, scene in iter_scenes("synthetic", "test", n, seed=3)]
    return [describe_scene(scene) for scene in scenes]


ODD_TEXTS = [
    "", "   ", "A", "a  b\tc\nd", "The RED circle's left; the 2nd one, 3.5 px!", "caf\u00e9 na\u00efve \u00fcber",
    "emoji \U0001F600 and \u4e2d\u6587 text", "&amp; &lt;b&gt; html &quot;entities&quot;", "don't we'll it's",
    "x" * 300, "word " * 400, "\u00c9COLE \u2014 dash \u2018quotes\u2019", "tab\x07bell\x00nul",
]


def test_word_memo_gives_open_clips_ids_for_captions_and_odd_texts():
    from open_clip.tokenizer import SimpleTokenizer

    from hnclip.models.tokenizer import _encode_by_word

    reference = SimpleTokenizer()  # open_clip's encode, untouched
    memo = _encode_by_word(SimpleTokenizer())
    texts = _captions(40) + ODD_TEXTS
    rng = random.Random(0)
    texts += [" ".join(rng.sample(text.split(), len(text.split()))) for text in texts[:10]]  # words reordered
    for text in texts + texts:  # the second pass reads every word from the memo
        assert memo(text) == reference.encode(text), text


@pytest.mark.parametrize("context_length", [77, 248])
def test_tokenize_matches_open_clips_call_with_truncation(context_length):
    from open_clip.tokenizer import SimpleTokenizer

    from hnclip.models.tokenizer import tokenize

    texts = _captions(8) + ODD_TEXTS
    expected = SimpleTokenizer()(texts, context_length=context_length)
    assert tokenize(texts, context_length).equal(expected)
