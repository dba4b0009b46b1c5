"""Offline preprocessing products for the GOAL and StructXLIP frameworks, built once per benchmark split.

- :mod:`.sentences` the deterministic sentence splitter and character -> CLIP-token span mapping.
- :mod:`.segments` SAM segments, their crops, and each sentence matched to its best segment
  (:func:`build_segments` / :class:`SegmentIndex`).
- :mod:`.edges` Canny edge maps of the image store's images and of the segment crops
  (:func:`build_edges` / :class:`EdgeIndex`).
- :mod:`.lexicon` the colour / material / texture word filter and StructXLIP's word-window chunks.
- :mod:`.oracle` object boxes of the synthetic benchmark as masks: SAM's stand-in in the CPU default.

Submodules import torch, transformers and OpenCV lazily, so importing this package is cheap.
"""

__all__ = ["edges", "lexicon", "oracle", "segments", "sentences"]
