"""The sentence splitter on hand-checked captions, and token spans against the tokenizer itself (brute force)."""

from __future__ import annotations

import pytest

from hnclip.models import tokenize
from hnclip.models.tokenizer import _tokenizer
from hnclip.preprocess import sentences as sentences_module
from hnclip.preprocess.sentences import char_span_to_tokens, split_sentences, token_offsets

CAPTIONS = [
    "A dog sits on a mat. It is 3.5 m long, e.g. quite big!  Why?",
    'The sign reads "STOP." Below it, a man\'s bike leans on the U.S. mailbox.',
    "no terminal punctuation here",
    "Two  spaces.\nA newline follows; then café and naïve words, 42 apples, and emoji 🙂 end.",
    "Dr. Smith's cat isn't here... It left?! Really.",
]


def texts(caption):
    return [s.text for s in split_sentences(caption)]


def test_splits_at_terminators_followed_by_space_only():
    assert texts(CAPTIONS[0]) == ["A dog sits on a mat.", "It is 3.5 m long, e.g. quite big!", "Why?"]


def test_keeps_closing_quotes_and_acronyms_inside_sentences():
    assert texts(CAPTIONS[1]) == ['The sign reads "STOP."', "Below it, a man's bike leans on the U.S. mailbox."]


def test_text_without_terminator_is_one_sentence():
    assert texts(CAPTIONS[2]) == [CAPTIONS[2]]


def test_abbreviation_and_ellipsis_and_mixed_terminators():
    assert texts(CAPTIONS[4]) == ["Dr. Smith's cat isn't here...", "It left?!", "Really."]


def test_whitespace_and_empty_pieces_are_dropped():
    assert texts("  One.   . Two.  ") == ["One.", ".", "Two."]  # a lone "." is kept: it is text
    assert texts("   ") == []


@pytest.mark.parametrize("caption", CAPTIONS)
def test_sentence_spans_index_the_caption(caption):
    for sentence in split_sentences(caption):
        assert caption[sentence.start:sentence.end] == sentence.text


@pytest.mark.parametrize("caption", CAPTIONS)
def test_token_span_of_each_sentence_holds_exactly_its_tokens(caption):
    # reference: the tokenizer's own ids of the whole caption (SOT at 0) and of the sentence alone
    ids = tokenize(caption, context_length=200)[0].tolist()
    offsets = token_offsets(caption)
    for sentence in split_sentences(caption):
        start, end = char_span_to_tokens(offsets, sentence.start, sentence.end)
        assert ids[start:end] == _tokenizer().encode(sentence.text), sentence.text
    assert len(offsets) == len(_tokenizer().encode(caption))


@pytest.mark.parametrize("caption", CAPTIONS)
def test_fast_offsets_agree_with_prefix_fallback(caption):
    fast = token_offsets(caption)
    slow = sentences_module._offsets_by_prefix(caption)
    for sentence in split_sentences(caption):
        assert char_span_to_tokens(fast, sentence.start, sentence.end) == \
            char_span_to_tokens(slow, sentence.start, sentence.end)


def test_fallback_is_used_when_the_regex_replay_disagrees(monkeypatch):
    caption = CAPTIONS[0]
    calls = []
    real = sentences_module._offsets_by_prefix
    monkeypatch.setattr(sentences_module, "_offsets_by_prefix", lambda c: calls.append(c) or real(c))
    monkeypatch.setattr(_tokenizer(), "encode", lambda text: [])  # forces a mismatch
    sentences_module.token_offsets(caption)
    assert calls == [caption]


def test_partial_word_span_maps_to_the_whole_word_and_empty_span_to_a_point():
    caption = "a photograph of dogs"
    offsets = token_offsets(caption)
    ids = tokenize(caption, context_length=20)[0].tolist()
    start, end = char_span_to_tokens(offsets, caption.index("graph"), caption.index("graph") + 3)
    assert ids[start:end] == _tokenizer().encode("photograph")
    point = char_span_to_tokens(offsets, caption.index(" of"), caption.index(" of") + 1)  # just the space
    assert point[0] == point[1]
