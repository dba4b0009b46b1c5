"""The image store: open_clip's eval geometry reproduced exactly, ids kept, errors naming the file."""

from __future__ import annotations

import hashlib
import json
import pickle

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image
from torchvision import transforms as T

from hnclip.data.image_store import ImageStore, build_store, to_model_input

SIZE = 32

# (width, height): portrait, landscape, square; shorter side already SIZE (not resampled; vertical crop
# offset 3.5 rounds to 4); horizontal offset 1.5 (rounds half to even, to 2); a long side of 37.6 px
# (truncated to 37, not rounded); an image smaller than SIZE (upscaled).
SHAPES = {"portrait": (41, 67), "landscape": (90, 47), "square": (50, 50), "exact": (SIZE, 39),
          "odd_margin": (44, 40), "long_side_truncated": (47, 40), "tiny": (20, 13)}


def _noise(width: int, height: int, seed: int) -> np.ndarray:
    # White noise: a one-pixel geometry error or another resampling filter changes pixels by tens of
    # levels, far above the uint8 rounding tolerance.
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


@pytest.fixture
def manifest(tmp_path):
    rows = []
    for seed, (name, (w, h)) in enumerate(SHAPES.items()):
        path = tmp_path / "raw" / f"{name}.png"
        path.parent.mkdir(exist_ok=True)
        Image.fromarray(_noise(w, h, seed)).save(path)
        rows.append({"image_id": name, "image_path": str(path), "caption": f"a {name} image"})
    jpeg = tmp_path / "raw" / "photo.jpg"
    Image.fromarray(_noise(120, 80, 99)).save(jpeg, quality=85)
    rows.append({"image_id": "photo", "image_path": str(jpeg), "caption": "a jpeg"})
    grey = tmp_path / "raw" / "grey.png"
    Image.fromarray(_noise(60, 70, 7)[..., 0], mode="L").save(grey)
    rows.append({"image_id": "grey", "image_path": str(grey), "caption": "a greyscale image"})
    return pd.DataFrame(rows)


def _torchvision_reference(path: str) -> np.ndarray:
    pipeline = T.Compose([T.Resize(SIZE, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(SIZE)])
    return np.asarray(pipeline(Image.open(path).convert("RGB")), dtype=np.int16)


def test_store_pixels_match_torchvision_resize_and_center_crop(manifest, tmp_path):
    build_store(manifest, tmp_path / "store", SIZE)
    store = ImageStore(tmp_path / "store")
    for row, path in enumerate(manifest["image_path"]):
        stored = store.read([row])[0].astype(np.int16)
        assert stored.shape == (SIZE, SIZE, 3)
        assert np.abs(stored - _torchvision_reference(path)).max() <= 1, manifest["image_id"][row]


def test_store_matches_open_clip_eval_transform(manifest, tmp_path):
    from open_clip.transform import image_transform

    build_store(manifest, tmp_path / "store", SIZE)
    store = ImageStore(tmp_path / "store")
    # mean 0, std 1 leaves open_clip's output at pixels / 255
    transform = image_transform(SIZE, is_train=False, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))
    for row, path in enumerate(manifest["image_path"]):
        reference = transform(Image.open(path)).permute(1, 2, 0).double().numpy() * 255.0
        assert np.abs(store.read([row])[0] - reference).max() <= 1.0, manifest["image_id"][row]


def test_store_round_trips_ids_rows_and_index(manifest, tmp_path):
    build_store(manifest, tmp_path / "store", SIZE)
    store = ImageStore(tmp_path / "store")
    assert store.image_ids == list(manifest["image_id"])
    assert len(store) == len(manifest) and store.image_size == SIZE
    assert [store.row(i) for i in manifest["image_id"]] == list(range(len(manifest)))
    expected_hash = hashlib.sha256("".join(f"{i}\t{p}\n" for i, p in
                                           zip(manifest["image_id"], manifest["image_path"], strict=True)).encode())
    index = json.loads((tmp_path / "store" / "index.json").read_text())
    assert index["count"] == len(manifest) and index["image_size"] == SIZE
    assert index["manifest_sha256"] == expected_hash.hexdigest()
    batch = store.read([3, 0, 3])
    assert batch.dtype == np.uint8 and batch.shape == (3, SIZE, SIZE, 3)
    np.testing.assert_array_equal(batch[1], _torchvision_reference(manifest["image_path"][0]).clip(0, 255))
    np.testing.assert_array_equal(batch[0], batch[2])
    with pytest.raises(KeyError, match="no_such_image"):
        store.row("no_such_image")
    with pytest.raises(IndexError, match=str(len(manifest))):
        store.read([len(manifest)])
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["images.npy", "index.json"]


def test_memmap_read_works_after_reopen_and_pickle(manifest, tmp_path):
    build_store(manifest, tmp_path / "store", SIZE)
    first = ImageStore(tmp_path / "store").read(range(len(manifest)))
    reopened = ImageStore(tmp_path / "store")
    np.testing.assert_array_equal(reopened.read(range(len(manifest))), first)
    blob = pickle.dumps(reopened)
    assert len(blob) < first.nbytes  # the path travels, not the pixels
    np.testing.assert_array_equal(pickle.loads(blob).read([4, 1]), first[[4, 1]])


def test_corrupt_jpeg_error_names_file_and_image_id(manifest, tmp_path):
    good = open(manifest["image_path"][6], "rb").read()
    truncated = tmp_path / "raw" / "truncated.jpg"
    truncated.write_bytes(good[: len(good) // 2])
    bad = pd.concat([manifest, pd.DataFrame([{"image_id": "cut", "image_path": str(truncated), "caption": "x"}])])
    with pytest.raises(ValueError, match=r"truncated\.jpg.*'cut'"):
        build_store(bad.reset_index(drop=True), tmp_path / "store", SIZE)
    assert not (tmp_path / "store" / "index.json").exists()
    assert not list((tmp_path / "store").glob("images.npy*"))  # no half-written array left behind

    garbage = tmp_path / "raw" / "garbage.jpg"
    garbage.write_bytes(b"not an image at all")
    with pytest.raises(ValueError, match=r"garbage\.jpg.*'junk'"):
        build_store(pd.DataFrame([{"image_id": "junk", "image_path": str(garbage)}]), tmp_path / "s2", SIZE)
    with pytest.raises(FileNotFoundError, match=r"'gone'.*missing\.png"):
        build_store(pd.DataFrame([{"image_id": "gone", "image_path": str(tmp_path / "missing.png")}]),
                    tmp_path / "s3", SIZE)


def test_parallel_build_equals_serial_build(manifest, tmp_path):
    build_store(manifest, tmp_path / "serial", SIZE)
    build_store(manifest, tmp_path / "parallel", SIZE, workers=2)
    serial, parallel = ImageStore(tmp_path / "serial"), ImageStore(tmp_path / "parallel")
    assert parallel.image_ids == serial.image_ids
    np.testing.assert_array_equal(parallel.read(range(len(serial))), serial.read(range(len(serial))))


def test_build_stores_a_repeated_id_once_and_rejects_one_naming_two_images(manifest, tmp_path):
    # a test split of your own captions lists an image once per caption: one store row, and the digest of
    # the rows stored, as for a manifest that lists it once
    from hnclip.data.image_store import manifest_digest

    build_store(pd.concat([manifest, manifest.iloc[[2]]]), tmp_path / "store", SIZE)
    store = ImageStore(tmp_path / "store")
    assert store.image_ids == [str(i) for i in manifest["image_id"]]
    assert store.manifest_sha256 == manifest_digest(manifest)
    other = manifest.iloc[[2]].assign(image_path=manifest["image_path"].iloc[0])
    with pytest.raises(ValueError, match="image_id 'square' with several image paths"):
        build_store(pd.concat([manifest, other]), tmp_path / "store2", SIZE)


def test_build_rejects_an_unknown_resample(manifest, tmp_path):
    with pytest.raises(ValueError, match="lanczos"):
        build_store(manifest, tmp_path / "store", SIZE, resample="lanczos")


def test_to_model_input_scales_and_normalises_like_to_tensor_normalize():
    rng = np.random.default_rng(0)
    batch = rng.integers(0, 256, (2, 5, 7, 3), dtype=np.uint8)
    mean, std = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)
    reference = (batch.astype(np.float64) / 255.0 - np.array(mean)) / np.array(std)  # float64, [B,H,W,C]
    out = to_model_input(batch, mean, std)
    assert out.dtype == torch.float32 and out.shape == (2, 3, 5, 7) and out.is_contiguous()
    np.testing.assert_allclose(out.permute(0, 2, 3, 1).double().numpy(), reference, atol=1e-5)
    read_only = batch.copy()
    read_only.flags.writeable = False
    torch.testing.assert_close(to_model_input(read_only, mean, std), out)
    with pytest.raises(ValueError, match="uint8"):
        to_model_input(batch.astype(np.float32), mean, std)


def test_recorded_checksum_is_the_sha256_of_the_written_file(manifest, tmp_path):
    build_store(manifest, tmp_path / "store", SIZE, workers=2)
    index = json.loads((tmp_path / "store" / "index.json").read_text())
    data = (tmp_path / "store" / "images.npy").read_bytes()
    assert index["images_sha256"] == hashlib.sha256(data).hexdigest() and index["images_bytes"] == len(data)
    assert ImageStore(tmp_path / "store").verify() is True


def test_a_truncated_store_fails_on_open_naming_the_file_and_both_sizes(manifest, tmp_path):
    build_store(manifest, tmp_path / "store", SIZE)
    path = tmp_path / "store" / "images.npy"
    full = path.stat().st_size
    header = full - len(manifest) * SIZE * SIZE * 3  # numpy's .npy header, padded to 64 or 128 bytes
    assert header in (64, 128)
    with open(path, "r+b") as handle:
        handle.truncate(full - SIZE * SIZE)  # a third of the last image lost
    with pytest.raises(ValueError, match=rf"{path} is truncated: {full - SIZE * SIZE:,} bytes.*describes {full:,}"):
        ImageStore(tmp_path / "store")
    path.write_bytes(path.read_bytes()[:10])  # not even a header left
    with pytest.raises(ValueError, match=rf"{path} has no valid \.npy header"):
        ImageStore(tmp_path / "store")
    path.unlink()
    with pytest.raises(FileNotFoundError, match=str(path)):
        ImageStore(tmp_path / "store")


def test_a_corrupted_store_fails_verification_naming_the_file_and_both_hashes(manifest, tmp_path):
    from hnclip.cli import main

    build_store(manifest, tmp_path / "store", SIZE)
    path = tmp_path / "store" / "images.npy"
    recorded = json.loads((tmp_path / "store" / "index.json").read_text())["images_sha256"]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte, size unchanged: only the checksum can tell
    path.write_bytes(bytes(data))
    store = ImageStore(tmp_path / "store")  # opening stays cheap: the size still matches
    with pytest.raises(ValueError, match=rf"{path} is corrupted: sha256 {hashlib.sha256(data).hexdigest()}, "
                                         rf"but .*recorded {recorded}"):
        store.verify()
    with pytest.raises(ValueError, match=rf"{path} is corrupted"):  # the verb, and so train/evaluate jobs
        main(["verify-store", str(tmp_path / "store")])


def test_a_store_built_before_checksums_were_recorded_still_opens_and_verifies_by_size(manifest, tmp_path, caplog):
    build_store(manifest, tmp_path / "store", SIZE)
    index_path = tmp_path / "store" / "index.json"
    index = json.loads(index_path.read_text())
    del index["images_sha256"], index["images_bytes"]
    index_path.write_text(json.dumps(index))
    assert ImageStore(tmp_path / "store").verify() is False
    assert "records no checksum" in caplog.text


def test_every_damaged_store_message_names_the_folder_to_delete_and_the_command_to_rerun(manifest, tmp_path):
    import re

    store = tmp_path / "results" / "data" / "bench" / "test_images"
    build_store(manifest, store, SIZE)
    path = store / "images.npy"
    hint = re.escape(f"rm -rf {store} && snakemake --cores all")
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size - 7)
    with pytest.raises(ValueError, match=rf"truncated.*{hint}"):
        ImageStore(store)
    path.write_bytes(b"\x93NUMPY")
    with pytest.raises(ValueError, match=rf"no valid \.npy header.*{hint}"):
        ImageStore(store)
    (store / "index.json").write_text("{")
    with pytest.raises(ValueError, match=rf"malformed.*{hint}"):
        ImageStore(store)
    (store / "index.json").unlink()
    with pytest.raises(FileNotFoundError, match=rf"no index\.json.*{hint}"):
        ImageStore(store)
