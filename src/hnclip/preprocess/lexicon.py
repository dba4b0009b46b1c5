"""StructXLIP's caption filter (drop colour, material and texture words) and its word-window chunks.

StructXLIP pairs an image's *edge map* with its caption stripped of what an edge map cannot show, so
the structure-centric terms align shape and layout words, not "red" or "wooden". The filter removes
whole words and phrases of a lexicon, case-insensitively, longest phrase first ("light blue" before
"blue"), then tidies spacing and doubled punctuation. A caption left with fewer than
``min_content_words`` words outside ``STOPWORDS`` is returned unchanged, as StructXLIP does (an empty
caption would be a useless positive).

The word lists are ours (general English plus the synthetic benchmark's colours and fill patterns),
in the spirit of StructXLIP's ``text_filters.py``; its released DOCCI launcher removes colours only,
its argument parser offers all three categories: the categories are a parameter here.

Chunks (:func:`chunk_spans`): StructXLIP's local term contrasts short word windows of the filtered
caption with edge crops. Windows slide with ``stride`` over the words of each clause (text between
``. , ; ! ?``); the window is 2 words for clauses of up to 4 words, ``base_window`` up to 10,
+1 up to 20, +2 up to 40, +3 beyond; at most ``max_spans`` chunks per caption.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["CATEGORIES", "COLOURS", "MATERIALS", "STOPWORDS", "TEXTURES", "chunk_spans", "filter_caption",
           "lexicon_pattern"]

COLOURS = (
    "red", "orange", "yellow", "green", "blue", "purple", "violet", "indigo", "pink", "brown", "black", "white",
    "gray", "grey", "beige", "cyan", "magenta", "teal", "turquoise", "maroon", "navy", "lime", "olive", "tan",
    "gold", "golden", "silver", "ivory", "cream", "peach", "mint", "lavender", "lilac", "burgundy", "crimson",
    "scarlet", "amber", "azure", "aqua", "khaki", "coral", "salmon", "charcoal", "bronze", "copper",
    "colorful", "colourful", "multicolored", "multicoloured", "reddish", "bluish", "greenish", "yellowish",
    "brownish", "pinkish", "grayish", "greyish", "whitish", "blackish",
    "light gray", "light grey", "dark gray", "dark grey", "light blue", "dark blue", "pale blue",
    "sky blue", "navy blue", "baby blue", "light green", "dark green", "pale green", "forest green",
    "lime green", "dark red", "light brown", "dark brown", "hot pink", "light pink", "off white",
    "off-white",
)
MATERIALS = (
    "wood", "wooden", "metal", "metallic", "steel", "iron", "aluminum", "aluminium", "brass", "tin", "chrome",
    "plastic", "glass", "ceramic", "porcelain", "stone", "marble", "granite", "concrete", "brick", "cement",
    "clay", "paper", "cardboard", "fabric", "cloth", "cotton", "wool", "woolen", "silk", "linen", "denim",
    "leather", "suede", "velvet", "satin", "lace", "nylon", "polyester", "rubber", "foam", "fur", "straw",
    "wicker", "bamboo", "asphalt", "gravel", "sand", "tile", "tiled", "plaster", "canvas", "felt",
)
TEXTURES = (
    "smooth", "rough", "soft", "glossy", "matte", "shiny", "dull", "grainy", "fuzzy", "fluffy", "furry",
    "silky", "velvety", "wrinkled", "crumpled", "woven", "knitted", "striped", "stripes", "stripy", "dotted",
    "dots", "spotted", "speckled", "polka dot", "polka-dot", "plaid", "checkered", "chequered", "patterned",
    "floral", "textured", "glittery", "sparkly", "transparent", "translucent", "opaque", "frosted",
    "reflective", "weathered", "rusty", "solid", "gradient", "noise texture", "noisy",
    "filled with stripes", "covered in dots", "painted solid",
)
CATEGORIES = {"colour": COLOURS, "material": MATERIALS, "texture": TEXTURES}
STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "of", "on", "or",
    "that", "the", "to", "with", "this", "there", "its",
})


def lexicon_pattern(terms: Iterable[str]) -> re.Pattern:
    """One regex matching any term as whole words, longest first, any whitespace between its words."""
    unique = sorted({t.strip().lower() for t in terms if t.strip()}, key=lambda t: (-len(t), t))
    if not unique:
        return re.compile(r"(?!x)x")  # matches nothing
    alternatives = [re.escape(t).replace(r"\ ", r"\s+") for t in unique]
    return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", re.IGNORECASE)


def _tidy(text: str) -> str:
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"\s+([,.;:!?])", r"\1", text)  # no space before punctuation
    text = re.sub(r"([,;:])(\s*[,;:])+", r"\1", text)  # ", ," left where a listed word stood alone
    text = re.sub(r"([,;:])(\s*[.!?])", r"\2", text)
    return text.strip()


_PATTERNS: dict[tuple[str, ...], re.Pattern] = {}


def filter_caption(caption: str, categories: Iterable[str] = ("colour", "material", "texture"),
                   min_content_words: int = 2) -> str:
    """``caption`` without the words of the lexicon ``categories`` (see the module docstring)."""
    key = tuple(sorted(set(categories)))
    unknown = [c for c in key if c not in CATEGORIES]
    if unknown:
        raise ValueError(f"unknown lexicon categor{'y' if len(unknown) == 1 else 'ies'} {unknown}; "
                         f"known: {sorted(CATEGORIES)}")
    if key not in _PATTERNS:
        _PATTERNS[key] = lexicon_pattern(t for c in key for t in CATEGORIES[c])
    original = _tidy(caption)
    marked = _PATTERNS[key].sub("\0", original)
    # a list of removed words ("a smooth, glossy seat") goes as one, with the commas between them
    cleaned = _tidy(re.sub(r"\0(?:\s*,?\s*\0)*", " ", marked))
    content = [w for w in re.findall(r"\w+", cleaned.lower()) if w not in STOPWORDS]
    return cleaned if len(content) >= min_content_words else original


def _window(n_words: int, base_window: int) -> int:
    if n_words <= 4:
        return 2
    if n_words <= 10:
        return base_window
    if n_words <= 20:
        return base_window + 1
    if n_words <= 40:
        return base_window + 2
    return base_window + 3


def chunk_spans(text: str, base_window: int = 3, stride: int = 1, max_spans: int = 64) -> list[tuple[int, int]]:
    """Character spans ``[start, end)`` of the word windows of ``text`` (see the module docstring).

    A clause shorter than its window gives no chunk.
    """
    if base_window < 1 or stride < 1 or max_spans < 1:
        raise ValueError(f"chunk_spans needs base_window, stride, max_spans >= 1; got {base_window}, {stride}, "
                         f"{max_spans}")
    words = list(re.finditer(r"\w+", text))
    bounds, begin = [], 0
    for punct in re.finditer(r"[.,;!?]+", text):
        bounds.append((begin, punct.end()))
        begin = punct.end()
    bounds.append((begin, len(text)))
    spans: list[tuple[int, int]] = []
    for clause_start, clause_end in bounds:
        clause = [w for w in words if clause_start <= w.start() < clause_end]
        window = _window(len(clause), base_window)
        for i in range(0, len(clause) - window + 1, stride):
            spans.append((clause[i].start(), clause[i + window - 1].end()))
            if len(spans) == max_spans:
                return spans
    return spans
