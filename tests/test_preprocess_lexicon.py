"""StructXLIP's caption filter and word-window chunks on hand-written captions."""

from __future__ import annotations

import pytest

from hnclip.preprocess.lexicon import chunk_spans, filter_caption


def test_removes_colour_material_and_texture_words_keeping_structure():
    caption = "A red wooden chair with a smooth, glossy seat stands beside a light blue glass table."
    assert filter_caption(caption) == "A chair with a seat stands beside a table."


def test_multiword_terms_go_whole_and_matching_ignores_case():
    assert filter_caption("The Light Gray wall and the NAVY BLUE door.") == "The wall and the door."


def test_only_whole_words_are_removed():
    caption = "A bored redwood ranger holds a tinted goldfish bowl."
    assert filter_caption(caption) == caption


def test_punctuation_is_tidied_where_listed_words_stood():
    assert filter_caption("Shapes: red, green, and a tall tower.") == "Shapes: and a tall tower."


def test_caption_left_without_content_falls_back_to_the_original():
    assert filter_caption("Red and blue.") == "Red and blue."
    assert filter_caption("A red, wooden box.", min_content_words=1) == "A box."


def test_categories_select_which_words_go():
    caption = "A red wooden striped box."
    assert filter_caption(caption, categories=("colour",)) == "A wooden striped box."
    assert filter_caption(caption, categories=("material", "texture")) == "A red box."
    with pytest.raises(ValueError, match="unknown lexicon category.*'shape'"):
        filter_caption(caption, categories=("shape",))


def test_synthetic_benchmark_attributes_are_removed():
    caption = ("In the top left corner there is a small striped red circle. "
               "At the center of the image sits a big teal star filled with stripes.")
    assert filter_caption(caption) == ("In the top left corner there is a small circle. "
                                       "At the center of the image sits a big star.")


def spans_text(text, **kwargs):
    return [text[a:b] for a, b in chunk_spans(text, **kwargs)]


def test_chunks_slide_within_clauses():
    text = "A big dog runs. The cat, on the mat sleeps"
    # clauses: "A big dog runs." (4 words -> window 2), "The cat," (2 -> 2), "on the mat sleeps" (4 -> 2)
    assert spans_text(text) == ["A big", "big dog", "dog runs", "The cat", "on the", "the mat", "mat sleeps"]


@pytest.mark.parametrize("n_words, window", [(4, 2), (5, 3), (10, 3), (11, 4), (20, 4), (21, 5), (40, 5), (41, 6)])
def test_window_grows_with_clause_length(n_words, window):
    text = " ".join(f"w{i}" for i in range(n_words))
    spans = spans_text(text, max_spans=100)
    assert len(spans) == n_words - window + 1
    assert spans[0] == " ".join(f"w{i}" for i in range(window))


def test_stride_and_span_cap():
    text = " ".join(f"w{i}" for i in range(10))  # window 3
    assert spans_text(text, stride=3) == ["w0 w1 w2", "w3 w4 w5", "w6 w7 w8"]
    assert len(chunk_spans(text, max_spans=2)) == 2


def test_clause_shorter_than_window_gives_no_chunk():
    assert spans_text("Dog.") == []
