"""Canny edge maps against OpenCV called directly, and the edge product against the store and crops it mirrors."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest
from test_preprocess_support import build_products, draw_scene

from hnclip.data.image_store import ImageStore
from hnclip.preprocess.edges import EdgeIndex, build_edges, canny_edges
from hnclip.preprocess.segments import SegmentIndex


@pytest.fixture(scope="module")
def products(tmp_path_factory):
    return build_products(tmp_path_factory.mktemp("edges"), n=6)


def fixture_rgb() -> np.ndarray:
    return np.asarray(draw_scene(1, 96, 80).convert("RGB"), dtype=np.uint8)


def test_canny_equals_opencv_pipeline_called_directly():
    rgb = fixture_rgb()
    grey = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    expected = cv2.Canny(cv2.GaussianBlur(grey, (5, 5), 0), 100, 200)
    np.testing.assert_array_equal(canny_edges(rgb), expected)
    np.testing.assert_array_equal(canny_edges(rgb, 30, 90, blur_ksize=0), cv2.Canny(grey, 30, 90))


def test_rectangle_edges_lie_on_its_border():
    rgb = np.full((40, 50, 3), 20, dtype=np.uint8)
    rgb[10:30, 12:40] = 230  # a bright rectangle; its border runs along rows 9/10, 29/30 and cols 11/12, 39/40
    edges = canny_edges(rgb, blur_ksize=0)
    assert set(np.unique(edges)) == {0, 255}
    ys, xs = np.nonzero(edges)
    near_row = np.minimum(np.abs(ys - 9.5), np.abs(ys - 29.5)) <= 1
    near_col = np.minimum(np.abs(xs - 11.5), np.abs(xs - 39.5)) <= 1
    assert np.all(near_row | near_col)
    assert edges[20, 10:14].any() and edges[20, 38:42].any() and edges[8:12, 25].any() and edges[28:32, 25].any()


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="low <= high"):
        canny_edges(fixture_rgb(), 200, 100)
    with pytest.raises(ValueError, match="blur_ksize"):
        canny_edges(fixture_rgb(), blur_ksize=4)
    with pytest.raises(ValueError, match="uint8"):
        canny_edges(fixture_rgb().astype(np.float32))


def test_product_holds_edges_of_store_images_and_segment_crops(products):
    _, store_dir, _, segments_dir, edges_dir = products
    store, segments, edges = ImageStore(store_dir), SegmentIndex(segments_dir), EdgeIndex(edges_dir / "index.json")
    assert edges.images.shape == (len(store), 32, 32) and edges.crops.shape == (len(segments.crops), 32, 32)
    for image_id in store.image_ids:
        row = store.row(image_id)
        np.testing.assert_array_equal(edges.images[edges.row(image_id)], canny_edges(store.images[row], 50, 100))
    for row in range(len(segments.crops)):
        np.testing.assert_array_equal(edges.crops[row], canny_edges(np.asarray(segments.crops[row]), 50, 100))
    assert edges.segments_sha256 == segments.content_sha256
    index = json.loads((edges_dir / "index.json").read_text())
    assert index["canny"] == {"low": 50, "high": 100, "blur_ksize": 5, "aperture": 3, "l2_gradient": False}
    with pytest.raises(KeyError, match="'nope'.*index.json"):
        edges.row("nope")


def test_store_and_crops_of_different_sizes_are_refused(products, tmp_path):
    from hnclip.data.image_store import build_store

    manifest, _, _, segments_dir, _ = products
    build_store(manifest, tmp_path / "store48", image_size=48)
    with pytest.raises(ValueError, match="32 px crops.*48 px images"):
        build_edges(tmp_path / "store48", segments_dir, tmp_path / "edges")


def test_truncated_edge_array_is_refused(products, tmp_path):
    import shutil

    copy = tmp_path / "edges"
    shutil.copytree(products[4], copy)
    np.save(copy / "crops.npy", np.zeros((1, 32, 32), dtype=np.uint8))
    with pytest.raises(ValueError, match="crops.npy holds"):
        EdgeIndex(copy)
