"""Your own captions (adapters table and webdataset, hnclip.data.own) on hand-made files in tmp_path: tables
in each format, WebDataset tars written with tarfile, every documented error naming its file and row, and
(marked e2e) a CSV and a WebDataset benchmark trained and evaluated through Snakemake by a config entry."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd
import pytest
import yaml
from PIL import Image

from hnclip.config.validation import ConfigError, load_schema, validate_config
from hnclip.config_checks import check_config
from hnclip.data import load_benchmark, own
from hnclip.data.fetch import fetch_benchmark
from hnclip.data.image_store import ImageStore
from hnclip.data.own import OwnFilesError, expand_braces
from hnclip.data.prepare import prepare_split

REPO = Path(__file__).resolve().parents[1]
SCHEMA_PATH = REPO / "workflow/schemas/config.schema.yaml"


# ------------------------------------------------------------------------------------------------ fixtures
def _color(i: int) -> tuple[int, int, int]:
    return (37 * i % 256, 91 * i % 256, 173 * i % 256)


def image_bytes(i: int, fmt: str = "PNG") -> bytes:
    """A small image, different for every ``i`` (so no two fixtures are byte-identical by accident)."""
    buffer = io.BytesIO()
    Image.new("RGB", (36 + i % 5, 30), _color(i + 1)).save(buffer, fmt)
    return buffer.getvalue()


def write_image(path: Path, i: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(image_bytes(i, "JPEG" if path.suffix == ".jpg" else "PNG"))
    return path


def write_table(path: Path, rows: list[tuple[str, str]], header=("filepath", "title"), sep="\t") -> Path:
    """A CSV/TSV the way open_clip reads it: a header, then one (image path, caption) row per line."""
    import csv

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter=sep, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_shard(path: Path, members: list[tuple[str, bytes]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def sample(key: str, i: int, caption: str, ext: str = "jpg") -> list[tuple[str, bytes]]:
    """img2dataset's members of one sample: the image, its caption and the metadata JSON."""
    return [(f"{key}.{ext}", image_bytes(i, "JPEG" if ext == "jpg" else "PNG")), (f"{key}.txt", caption.encode()),
            (f"{key}.json", json.dumps({"key": key, "caption": caption}).encode())]


@pytest.fixture
def csv_root(tmp_path) -> Path:
    """Tables in meta/ with image paths relative to it, one absolute path, several captions per image."""
    root = tmp_path / "mine"
    for i, name in enumerate(("a", "b", "c", "d", "e")):
        write_image(root / "images" / f"{name}.png", i)
    outside = write_image(tmp_path / "elsewhere" / "f.png", 9)
    write_table(root / "meta" / "train.csv", [
        ("../images/a.png", "A red square."),
        ("../images/b.png", "A green square, with a comma."),
        ("../images/a.png", "  The same red square, again.  "),
        (str(outside), "An image outside the root."),
    ])
    write_table(root / "meta" / "test.tsv", [
        ("../images/c.png", "first caption of c"),
        ("../images/d.png", "d has a caption\nthat spans two lines"),
        ("../images/c.png", "second caption of c"),
        ("../images/e.png", "e"),
    ])
    return root


CSV_SETTINGS = {"files": {"train": "meta/train.csv", "test": "meta/test.tsv"}}


def load(root, split, settings=CSV_SETTINGS, adapter="table", **kwargs):
    return load_benchmark(adapter, root, split, settings=settings, benchmark="mine", **kwargs)


# ---------------------------------------------------------------------------------------------- tables
def test_a_table_gives_one_row_per_caption_with_paths_against_the_tables_folder(csv_root, tmp_path):
    train = load(csv_root, "train")
    assert list(train["image_id"]) == ["images/a.png", "images/b.png", "images/a.png#2",
                                       str((tmp_path / "elsewhere" / "f.png").resolve())]
    assert list(train["image_path"]) == [str((csv_root / "images" / n).resolve()) for n in ("a.png", "b.png", "a.png")
                                         ] + [str((tmp_path / "elsewhere" / "f.png").resolve())]
    assert list(train["caption"]) == ["A red square.", "A green square, with a comma.", "The same red square, again.",
                                      "An image outside the root."]


def test_ids_stay_relative_under_a_root_reached_through_a_link(csv_root, tmp_path):
    (tmp_path / "link").symlink_to(csv_root)
    assert list(load(tmp_path / "link", "train")["image_id"])[:3] == ["images/a.png", "images/b.png", "images/a.png#2"]


def test_several_captions_of_a_test_image_share_its_id_and_its_store_row(csv_root, tmp_path):
    test = load(csv_root, "test")
    assert list(test["image_id"]) == ["images/c.png", "images/d.png", "images/c.png", "images/e.png"]
    assert test["caption"][1] == "d has a caption\nthat spans two lines"
    source = {"benchmark": "mine", "adapter": "table", "root": str(csv_root), "adapter_settings": CSV_SETTINGS}
    prepare_split(source, "test", 16, tmp_path / "test.csv", tmp_path / "test_images")
    store = ImageStore(tmp_path / "test_images")
    assert store.image_ids == ["images/c.png", "images/d.png", "images/e.png"]
    assert len(pd.read_csv(tmp_path / "test.csv")) == 4


def test_grouped_test_split_is_scored_with_every_caption_a_query(csv_root, tmp_path):
    import torch

    from hnclip.evaluate import _unique_images, recall_at_k

    test = load(csv_root, "test")
    image_ids, text_image = _unique_images(test)
    assert image_ids == ["images/c.png", "images/d.png", "images/e.png"] and text_image.tolist() == [0, 1, 0, 2]
    images = torch.eye(3)
    texts = torch.eye(3)[text_image]
    metrics = recall_at_k(images, texts, ks=(1,), text_image_ids=text_image)
    assert metrics == {"i2t_r1": 100.0, "t2i_r1": 100.0}


def test_custom_keys_comma_separator_and_gzip(tmp_path):
    root = tmp_path / "r"
    write_image(root / "x.png", 1)
    write_image(root / "y.png", 2)
    path = write_table(root / "train.csv", [("x, quoted", "x.png"), ("y", "y.png")], header=("caption", "path"), sep=",")
    with open(path, "rb") as f, gzip.open(root / "train.csv.gz", "wb") as g:
        g.write(f.read())
    settings = {"files": {"train": "train.csv.gz"}, "img_key": "path", "caption_key": "caption", "separator": ","}
    manifest = load(root, "train", settings)
    assert list(manifest["image_id"]) == ["x.png", "y.png"] and manifest["caption"][0] == "x, quoted"


def test_json_lines_with_a_list_of_captions(tmp_path):
    root = tmp_path / "r"
    write_image(root / "imgs" / "p.jpg", 3)
    write_image(root / "imgs" / "q.jpg", 4)
    lines = [{"image": "imgs/p.jpg", "texts": ["one", "two"], "other": 1}, {"image": "imgs/q.jpg", "texts": "three"}]
    (root / "test.jsonl").write_text("\n".join(json.dumps(r) for r in lines) + "\n\n")
    settings = {"files": {"test": "test.jsonl"}, "img_key": "image", "caption_key": "texts"}
    manifest = load(root, "test", settings)
    assert list(manifest["image_id"]) == ["imgs/p.jpg", "imgs/p.jpg", "imgs/q.jpg"]
    assert list(manifest["caption"]) == ["one", "two", "three"]


def test_parquet_with_pyarrow(tmp_path):
    pytest.importorskip("pyarrow")
    root = tmp_path / "r"
    write_image(root / "p.png", 5)
    write_image(root / "q.png", 6)
    pd.DataFrame({"filepath": ["p.png", "q.png"], "title": ["pp", "qq"]}).to_parquet(root / "train.parquet")
    manifest = load(root, "train", {"files": {"train": "train.parquet"}})
    assert list(manifest["caption"]) == ["pp", "qq"]


def test_parquet_without_pyarrow_says_what_to_install(tmp_path, monkeypatch):
    root = tmp_path / "r"
    root.mkdir()
    (root / "train.parquet").write_bytes(b"PAR1")

    def no_pyarrow(*args, **kwargs):
        raise ImportError("Missing optional dependency 'pyarrow'")

    monkeypatch.setattr(pd, "read_parquet", no_pyarrow)
    with pytest.raises(OwnFilesError, match=r"train\.parquet: reading Parquet needs pyarrow.*pip install pyarrow"):
        load(root, "train", {"files": {"train": "train.parquet"}})


# ------------------------------------------------------------------------------------------ table errors
def test_a_missing_column_lists_the_columns_there_are(csv_root):
    write_table(csv_root / "meta" / "train.csv", [("../images/a.png", "x")], header=("path", "caption"))
    with pytest.raises(OwnFilesError, match=r"meta/train\.csv \(header, line 1\): no column 'filepath' \(img_key\), "
                                            r"'title' \(caption_key\); the columns there are \['path', 'caption'\]"):
        load(csv_root, "train")


def test_a_comma_separated_file_read_with_the_tab_default_hints_at_the_separator(csv_root):
    write_table(csv_root / "meta" / "train.csv", [("../images/a.png", "x")], sep=",")
    with pytest.raises(OwnFilesError, match=r"columns there are \['filepath,title'\]; the header reads as one "
                                            r"column, so the separator may be ',' rather than '\\t'"):
        load(csv_root, "train")


def test_a_missing_image_names_the_table_the_line_and_the_path(csv_root):
    # line 2 spans two lines (a quoted line break), so the missing image's row starts on line 4
    write_table(csv_root / "meta" / "train.csv", [("../images/a.png", "two\nlines"), ("../images/zz.png", "x")])
    with pytest.raises(OwnFilesError, match=r"meta/train\.csv line 4: image .*/images/zz\.png does not exist "
                                            r"\('\.\./images/zz\.png' relative to the table's folder"):
        load(csv_root, "train")


def test_an_undecodable_image_names_the_table_and_the_line(csv_root):
    (csv_root / "images" / "b.png").write_bytes(b"not a png at all")
    with pytest.raises(OwnFilesError, match=r"meta/train\.csv line 3: image .*/images/b\.png: cannot be decoded"):
        load(csv_root, "train")


def test_a_truncated_image_is_undecodable(csv_root):
    data = image_bytes(1, "JPEG")
    write_image(csv_root / "images" / "t.jpg", 0).write_bytes(data[: len(data) // 2])
    write_table(csv_root / "meta" / "train.csv", [("../images/t.jpg", "x")])
    with pytest.raises(OwnFilesError, match=r"line 2: image .*t\.jpg: cannot be decoded"):
        load(csv_root, "train")


def test_an_empty_caption_names_the_table_and_the_line(csv_root):
    write_table(csv_root / "meta" / "test.tsv", [("../images/c.png", "ok"), ("../images/d.png", "   ")])
    with pytest.raises(OwnFilesError, match=r"meta/test\.tsv line 3: column 'title' is an empty caption"):
        load(csv_root, "test")


def test_a_row_with_the_wrong_number_of_fields(csv_root):
    (csv_root / "meta" / "train.csv").write_text("filepath\ttitle\n../images/a.png\tx\textra\n")
    with pytest.raises(OwnFilesError, match=r"train\.csv line 2: 3 field\(s\), the header has 2"):
        load(csv_root, "train")


@pytest.mark.parametrize("name", ["t.tsv", "t.tsv.gz", "t.jsonl"])
def test_a_latin1_caption_names_the_tables_line_and_column(tmp_path, name):
    """Python's decoder gives a byte position within a chunk; the error gives the line a person opens."""
    root = tmp_path / "r"
    write_image(root / "p.png", 1)
    rows = [("p.png", f"caption number {i}, plain ASCII") for i in range(600)]  # past the decoder's first chunk
    rows[400] = ("p.png", "un caf\u00e9 cr\u00e8me")
    if name.endswith(".jsonl"):
        lines = [json.dumps({"filepath": f, "title": c}, ensure_ascii=False) for f, c in rows]
        line, column = 401, len('{"filepath": "p.png", "title": "un caf') + 1
    else:
        lines = ["filepath\ttitle"] + [f"{f}\t{c}" for f, c in rows]
        line, column = 402, len("p.png\tun caf") + 1
    data = ("\n".join(lines) + "\n").encode("latin-1")
    (root / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    with pytest.raises(OwnFilesError) as info:
        load(root, "test", {"files": {"test": name}})
    assert f"{name} line {line}, column {column} (byte 0xE9): not UTF-8 text" in str(info.value)


def test_json_lines_errors_name_the_line_and_its_fields(tmp_path):
    root = tmp_path / "r"
    write_image(root / "p.png", 1)
    (root / "t.jsonl").write_text('{"filepath": "p.png", "title": "ok"}\n{"path": "p.png", "title": "x"}\n')
    settings = {"files": {"test": "t.jsonl"}}
    with pytest.raises(OwnFilesError, match=r"t\.jsonl line 2: no column 'filepath' \(img_key\); the columns there "
                                            r"are \['path', 'title'\]"):
        load(root, "test", settings)
    (root / "t.jsonl").write_text('{"filepath": "p.png", "title": null}\n')
    with pytest.raises(OwnFilesError, match=r"t\.jsonl line 1: column 'title' has no caption \(null\)"):
        load(root, "test", settings)
    (root / "t.jsonl").write_text('{"filepath": "p.png", "title": ["a", ""]}\n')
    with pytest.raises(OwnFilesError, match=r"t\.jsonl line 1: column 'title\[1\]' is an empty caption"):
        load(root, "test", settings)
    (root / "t.jsonl").write_text('{"filepath": "p.png", "title": "a"}\n{"filepath": "p.png", "title": 7}\nnope\n')
    with pytest.raises(OwnFilesError, match=r"t\.jsonl line 2: column 'title' is int 7, not text"):
        load(root, "test", settings)


def test_a_url_a_missing_table_and_an_unknown_format(csv_root):
    write_table(csv_root / "meta" / "train.csv", [("https://example.org/a.jpg", "x")])
    with pytest.raises(OwnFilesError, match=r"line 2: image 'https://example\.org/a\.jpg' is a URL"):
        load(csv_root, "train")
    with pytest.raises(FileNotFoundError, match=r"table .*meta/nope\.csv does not exist"):
        load(csv_root, "train", {"files": {"train": "meta/nope.csv"}})
    (csv_root / "t.xlsx").write_bytes(b"")
    with pytest.raises(OwnFilesError, match=r"t\.xlsx: unknown format '\.xlsx'; known: \.csv, \.tsv"):
        load(csv_root, "train", {"files": {"train": "t.xlsx"}})


def test_an_image_in_train_and_test_names_both_rows(csv_root):
    write_table(csv_root / "meta" / "test.tsv", [("../images/c.png", "c"), ("../images/b.png", "b again")])
    with pytest.raises(OwnFilesError, match=r"same image is in split 'test' \(table .*meta/test\.tsv line 3: image "
                                            r".*images/b\.png\) and split 'train' \(table .*meta/train\.csv line 3"):
        load(csv_root, "test")
    with pytest.raises(OwnFilesError, match=r"same image is in split 'train' .* and split 'test'"):
        load(csv_root, "train")


def test_a_byte_identical_copy_under_another_name_is_the_same_image(csv_root):
    (csv_root / "images" / "copy_of_a.png").write_bytes((csv_root / "images" / "a.png").read_bytes())
    write_table(csv_root / "meta" / "test.tsv", [("../images/copy_of_a.png", "a copy")])
    with pytest.raises(OwnFilesError, match=r"copy_of_a\.png\) and split 'train' \(table .*train\.csv line 2"):
        load(csv_root, "test")


def test_a_split_without_a_table_and_settings_errors(csv_root):
    with pytest.raises(ValueError, match=r"split 'val' has no table; benchmarks\.mine\.table\.files lists"):
        load(csv_root, "val")
    with pytest.raises(ValueError, match=r"benchmarks\.mine\.table: unknown key\(s\) \['csv_img_key'\]"):
        load(csv_root, "train", {**CSV_SETTINGS, "csv_img_key": "x"})
    with pytest.raises(ValueError, match=r"benchmarks\.mine\.table\.files: unknown split 'dev'"):
        load(csv_root, "train", {"files": {"dev": "x.csv"}})


# ------------------------------------------------------------------------------------------ WebDataset
@pytest.fixture
def wds_root(tmp_path) -> Path:
    """img2dataset-style output folders, one per split, whose keys both start at 000000000."""
    root = tmp_path / "shards"
    write_shard(root / "train" / "00000.tar", sample("000000000", 10, "a blue one") + sample("000000001", 11, "b"))
    write_shard(root / "train" / "00001.tar", sample("000010000", 12, "c", ext="png"))
    write_shard(root / "test" / "00000.tar", sample("000000000", 13, "the first test image")
                + sample("000000001", 14, " second\n"))
    return root


WDS_SETTINGS = {"shards": {"train": "train/{00000..00001}.tar", "test": ["test/00000.tar"]}}


def load_wds(root, split, tmp_path, settings=WDS_SETTINGS):
    return load(root, split, settings, adapter="webdataset", work_dir=tmp_path / "unpacked" / split)


def test_shards_give_one_row_per_sample_with_the_image_unpacked(wds_root, tmp_path):
    train = load_wds(wds_root, "train", tmp_path)
    assert list(train["image_id"]) == ["000000000", "000000001", "000010000"]
    assert list(train["caption"]) == ["a blue one", "b", "c"]
    unpacked = tmp_path / "unpacked" / "train"
    assert list(train["image_path"]) == [str((unpacked / n).resolve())
                                         for n in ("000000000.jpg", "000000001.jpg", "000010000.png")]
    assert (unpacked / "000010000.png").read_bytes() == image_bytes(12, "PNG")
    test = load_wds(wds_root, "test", tmp_path)  # the same keys as train's, different images: no error
    assert list(test["caption"]) == ["the first test image", "second"]


def test_prepare_unpacks_into_the_split_store(wds_root, tmp_path):
    source = {"benchmark": "mine", "adapter": "webdataset", "root": str(wds_root), "adapter_settings": WDS_SETTINGS}
    prepare_split(source, "train", 16, tmp_path / "train.csv", tmp_path / "train_images")
    manifest = pd.read_csv(tmp_path / "train.csv", dtype=str)
    assert all(p.startswith(str((tmp_path / "train_images" / "originals").resolve())) for p in manifest["image_path"])
    assert len(ImageStore(tmp_path / "train_images")) == 3


@pytest.mark.parametrize("members, message", [
    (sample("k1", 1, "x")[:1], r"member 'k1\.jpg': image without a caption \(no k1\.txt in the shard\)"),
    (sample("k1", 1, "x")[1:], r"member 'k1\.txt': caption without an image"),
    (sample("k1", 1, "x") + [("k1.png", image_bytes(2))], r"member 'k1\.png': key 'k1' already has the image"),
    (sample("k1", 1, "  \n"), r"member 'k1\.txt': empty caption"),
    ([("k1.jpg", b"garbage"), ("k1.txt", b"x")], r"member 'k1\.jpg': cannot be decoded as an image"),
    ([("k1.jpg", image_bytes(1, "JPEG")), ("k1.txt", b"\xff\xfe bad")], r"member 'k1\.txt': the caption is not UTF-8"),
    ([("k1.json", b"{}")], r"member 'k1\.json': key 'k1' has neither an image .* nor a caption"),
    ([("README", b"hello")], r"member 'README' is not named <key>\.<extension>"),
])
def test_shard_errors_name_the_shard_and_the_member(tmp_path, members, message):
    write_shard(tmp_path / "s" / "bad.tar", members)
    with pytest.raises(OwnFilesError, match=r"shard .*s/bad\.tar " + message):
        load_wds(tmp_path / "s", "test", tmp_path, {"shards": {"test": "bad.tar"}})


def test_a_link_member_and_a_key_in_two_shards(tmp_path):
    root = tmp_path / "s"
    root.mkdir()
    with tarfile.open(root / "link.tar", "w") as tar:
        info = tarfile.TarInfo("k1.jpg")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    with pytest.raises(OwnFilesError, match=r"link\.tar member 'k1\.jpg' is a link or special file"):
        load_wds(root, "test", tmp_path, {"shards": {"test": "link.tar"}})
    write_shard(root / "a.tar", sample("k1", 1, "x"))
    write_shard(root / "b.tar", sample("k1", 2, "y"))
    with pytest.raises(OwnFilesError, match=r"key 'k1' is in shard .*a\.tar and again in shard .*b\.tar"):
        load_wds(root, "test", tmp_path, {"shards": {"test": "{a,b}.tar"}})


def test_the_same_image_bytes_in_train_and_test_shards(wds_root, tmp_path):
    write_shard(wds_root / "test" / "00000.tar", sample("000000007", 11, "b again"))  # train's 000000001 image
    with pytest.raises(OwnFilesError, match=r"same image is in split 'test' \(shard .*test/00000\.tar member "
                                            r"'000000007\.jpg'\) and split 'train' \(shard .*train/00000\.tar member "
                                            r"'000000001\.jpg'\)"):
        load_wds(wds_root, "test", tmp_path)


def test_a_missing_shard_and_a_missing_work_dir(wds_root, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"shard .*train/00002\.tar does not exist"):
        load_wds(wds_root, "train", tmp_path, {"shards": {"train": "train/{00000..00002}.tar"}})
    with pytest.raises(ValueError, match="needs a work_dir"):
        load(wds_root, "train", WDS_SETTINGS, adapter="webdataset")


def test_brace_patterns_expand_as_webdataset_does():
    assert expand_braces("train-{000000..000003}.tar") == [f"train-00000{i}.tar" for i in range(4)]
    assert expand_braces("{a,b}/x{8..10}.tar") == ["a/x8.tar", "a/x9.tar", "a/x10.tar", "b/x8.tar", "b/x9.tar",
                                                   "b/x10.tar"]
    assert expand_braces("s{0..6..3}{x..z}") == ["s0x", "s0y", "s0z", "s3x", "s3y", "s3z", "s6x", "s6y", "s6z"]
    assert expand_braces("plain.tar") == ["plain.tar"] and expand_braces("{keep}.tar") == ["{keep}.tar"]
    assert expand_braces("{07..10}") == ["07", "08", "09", "10"]


# ------------------------------------------------------------------------------- fetch, config and schema
def test_fetch_records_the_files_and_writes_nothing_into_the_root(csv_root):
    before = sorted(p.relative_to(csv_root) for p in csv_root.rglob("*"))
    record = fetch_benchmark("mine", "table", csv_root, {"table": CSV_SETTINGS, "expected_counts": {}})
    assert sorted(p.relative_to(csv_root) for p in csv_root.rglob("*")) == before
    assert record["origin"]["kind"] == "own files" and record["adapter_settings"] == CSV_SETTINGS
    assert [f["path"] for f in record["origin"]["files"]["train"]] == [str(csv_root / "meta" / "train.csv")]
    with pytest.raises(FileNotFoundError, match=r"nope\.tsv \(benchmarks\.mine\.table\.files\.test\) does not exist"):
        fetch_benchmark("mine", "table", csv_root, {"table": {"files": {"test": "nope.tsv"}}})
    with pytest.raises(FileNotFoundError, match=r"root folder .*absent \(benchmarks\.mine\.root\) does not exist"):
        fetch_benchmark("mine", "table", csv_root / "absent", {"table": CSV_SETTINGS})


def test_prepare_logs_how_many_captions_the_text_tower_cuts(tmp_path):
    """`hnclip prepare --context-length 248` (the rule passes backbone.context_length) warns with the count and
    the share of the split's captions longer than 248 positions: a 100,000-character caption used to train
    with no word. "cat" is one CLIP token: 246 of them and SOT/EOT fill 248 positions exactly, 247 do not fit."""
    root = tmp_path / "mine"
    for i in range(4):
        write_image(root / f"{i}.png", i)
    captions = ["A short caption.", " ".join(["cat"] * 246), " ".join(["cat"] * 247), "word " * 20_000]
    write_table(root / "train.tsv", [(f"{i}.png", c) for i, c in enumerate(captions)])
    settings = {"files": {"train": "train.tsv"}}
    record = fetch_benchmark("mine", "table", root, {"table": settings, "expected_counts": {}})
    (tmp_path / "source.json").write_text(json.dumps(record))
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "hnclip", "prepare", "--source", str(tmp_path / "source.json"),
                           "--split", "train", "--image-size", "32", "--context-length", "248",
                           "--manifest", str(tmp_path / "train.csv"), "--images", str(tmp_path / "train_images")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    warnings = [line for line in done.stderr.splitlines() if " WARNING " in line]
    assert len(warnings) == 1, done.stderr[-3000:]
    assert "mine/train: 2 of 4 captions (50.0%) are longer than the text tower's 248 positions" in warnings[0]


def _config(**bench) -> dict:
    return {"benchmarks": {"mine": {"adapter": "table", "root": "/data/mine", "train_set": "mine", **bench}},
            "methods": {"hnclip": {"framework": "longclip", "hn": True}},
            "backbone": {"source": "openai", "checkpoint": "x.pt"}}


def test_the_config_checks_name_the_key():
    cfg = validate_config(_config(table={"files": {"train": "a.csv", "test": "b.csv"}}), SCHEMA_PATH)
    assert cfg["benchmarks"]["mine"]["table"] == {"files": {"train": "a.csv", "test": "b.csv"}, **{
        k: v for k, v in own.DEFAULTS["table"].items() if k != "files"}}
    check_config(cfg)
    with pytest.raises(ConfigError, match=r"benchmarks\.mine\.table\.files: has no 'train' entry, but "
                                          r"benchmarks\.mine\.splits lists 'train'"):
        check_config(validate_config(_config(table={"files": {"test": "b.csv"}}), SCHEMA_PATH))
    with pytest.raises(ConfigError, match=r"benchmarks\.mine\.table\.files: required for adapter table"):
        check_config(validate_config(_config(), SCHEMA_PATH))
    with pytest.raises(ConfigError, match=r"benchmarks\.mine\.webdataset: only for adapter webdataset"):
        check_config(validate_config(_config(table={"files": {"train": "a", "test": "b"}},
                                             webdataset={"shards": {"test": "x.tar"}}), SCHEMA_PATH))
    with pytest.raises(ConfigError, match=r"benchmarks\.mine\.table\.files\.val: split 'val' is not in "):
        check_config(validate_config(_config(table={"files": {"train": "a", "test": "b", "val": "c"}}),
                                     SCHEMA_PATH))
    with pytest.raises(ConfigError, match=r"config key benchmarks\.mine\.table\.files: 'tset' is not allowed; did "
                                          r"you mean 'test'\?"):
        validate_config(_config(table={"files": {"train": "a.csv", "tset": "b.csv"}}), SCHEMA_PATH)


def test_adapter_defaults_agree_with_the_schema():
    props = load_schema(SCHEMA_PATH)["properties"]["benchmarks"]["additionalProperties"]["properties"]
    for adapter, defaults in own.DEFAULTS.items():
        schema = props[adapter]["properties"]
        assert set(schema) == set(defaults), adapter
        assert {k: v["default"] for k, v in schema.items() if "default" in v} == {
            k: v for k, v in defaults.items() if k not in ("files", "shards")}
    assert {"table", "webdataset"} <= set(props["adapter"]["enum"])


# ------------------------------------------------------------------------------------------------- e2e
E2E_CONFIG = """
scale: toy
backbone: {source: pretrain, name: micro, image_size: 32, context_length: 248, frozen_positions: 20}
pretrain:
  benchmark: synthetic
  caption_column: short_caption
  context_length: 77
  pool: {size: 32, seed: 0}
  train: {epochs: 1, micro_batch: 16, accum_steps: 1, lr: 0.001, warmup_steps: 1, dynamics_every: 0}
  long:
    train: {epochs: 1, micro_batch: 16, accum_steps: 1, lr: 0.001, warmup_steps: 1, dynamics_every: 0,
            eval_every_epoch: false}
benchmarks:
  synthetic:
    adapter: synthetic
    root: resources/synthetic
    splits: [test]
    synthetic: {n_train: 0, n_test: 8, image_size: 48, seed: 0}
  my_captions:
    label: My captions
    adapter: table
    root: CSV_ROOT
    train_set: my_captions
    table: {files: {train: train.csv, test: test.csv}}
  my_shards:
    adapter: webdataset
    root: WDS_ROOT
    train_set: my_shards
    webdataset: {shards: {train: "train/{00000..00001}.tar", test: test/00000.tar}}
train: {epochs: 1, micro_batch: 4, accum_steps: 1, lr: 0.0005, warmup_steps: 1, dynamics_every: 0}
seeds: [0]
methods:
  longclip: {framework: longclip, hn: false, token_weight: 0.0}
  hnclip: {framework: longclip, hn: true}
experiments:
  main: {benchmarks: [my_captions, my_shards], methods: [longclip, hnclip]}
evaluate: {batch_size: 8}
"""


@pytest.mark.e2e
def test_a_csv_and_a_webdataset_train_and_evaluate_through_snakemake(tmp_path):
    from checkout import copy_checkout, user_env

    data = tmp_path / "data"
    csv_root = data / "csv"
    for i in range(10):
        write_image(csv_root / "images" / f"{i}.png", 20 + i)
    write_table(csv_root / "train.csv", [(f"images/{i}.png", f"photo number {i}") for i in range(6)]
                + [("images/0.png", "photo zero, a second caption")])
    write_table(csv_root / "test.csv", [(f"images/{i}.png", f"test photo {i}") for i in range(6, 10)]
                + [("images/6.png", "test photo six again")])
    wds_root = data / "wds"
    write_shard(wds_root / "train" / "00000.tar", [m for i in range(4) for m in sample(f"{i:09d}", 40 + i, f"s {i}")])
    write_shard(wds_root / "train" / "00001.tar", [m for i in range(4, 6) for m in sample(f"{i:09d}", 40 + i, f"s {i}")])
    write_shard(wds_root / "test" / "00000.tar", [m for i in range(3) for m in sample(f"{i:09d}", 60 + i, f"t {i}")])
    before = {p: p.stat().st_mtime_ns for p in data.rglob("*")}

    root = copy_checkout(tmp_path / "checkout")
    (root / "own.yaml").write_text(E2E_CONFIG.replace("CSV_ROOT", str(csv_root)).replace("WDS_ROOT", str(wds_root)))
    # the target before --configfile, which takes every value after it (the README's command)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "results/tables/main.csv", "--cores", "1",
                           "--configfile", "own.yaml"], cwd=root, env=user_env(), capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0:
        logs = "\n".join(f"== {p}\n{p.read_text()[-1500:]}" for p in (root / "results/logs").rglob("*.log")
                         if p.stat().st_size)
        pytest.fail(f"snakemake failed:\n{proc.stderr[-4000:]}\n{logs[-6000:]}")
    results = root / "results"
    for bench, n_images, n_texts in (("my_captions", 4, 5), ("my_shards", 3, 3)):
        evals = sorted((results / "evals" / bench).glob(f"*/*/*/*/{bench}.json"))
        assert [p.relative_to(results / "evals" / bench).parts[0] for p in evals] == ["hnclip", "longclip"], evals
        for path in evals:
            record = json.loads(path.read_text())
            assert (record["n_images"], record["n_texts"]) == (n_images, n_texts), path
            assert {"i2t_r1", "t2i_r1"} <= set(record["metrics"]), record
    train = pd.read_csv(results / "data/my_captions/train.csv", dtype=str)
    assert "images/0.png#2" in set(train["image_id"]) and len(train) == 7
    assert len(list((results / "data/my_shards/train_images/originals").glob("*.jpg"))) == 6
    source = yaml.safe_load((results / "data/my_shards/source.json").read_text())
    assert source["origin"]["kind"] == "own files" and len(source["origin"]["files"]["train"]) == 2
    assert (results / "tables/main.csv").stat().st_size > 0
    # the user's folders were only read
    assert {p: p.stat().st_mtime_ns for p in data.rglob("*")} == before
