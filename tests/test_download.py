"""hnclip.data.download and its parts (transport, checksum_lock, archives), offline: a loopback HTTP
server for URLs, a pre-built Hub cache for the Hub.

Every expected checksum is computed here with hashlib on the bytes the test itself served, and every
unpacked file is compared with the bytes the test put into the archive.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import logging
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from hnclip.data import transport
from hnclip.data.archives import ArchiveError, unpack_archive
from hnclip.data.checksum_lock import ChecksumMismatchError
from hnclip.data.download import ManualDownloadRequired, download_benchmark, download_checkpoint, load_sources
from hnclip.data.transport import DownloadError, download_file
from hnclip.rehearsal.hub_cache import populate_hub_cache

# ---------------------------------------------------------------------------------------------------
# loopback server


class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves ``server.files`` with Range support; knobs on the server object simulate bad networks."""

    def do_GET(self):  # noqa: N802 (http.server's naming)
        server = self.server
        server.requests.append((self.path, self.headers.get("Range")))
        body = server.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        start = 0
        rng = self.headers.get("Range")
        if rng and not server.ignore_range:
            start = int(rng.removeprefix("bytes=").split("-")[0])
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        payload = body[start:]
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if server.cut_next is not None:
            # announce the full length, send part of it, drop the connection: a broken download
            self.wfile.write(payload[: server.cut_next])
            server.cut_next = None
            self.close_connection = True
            return
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.files, httpd.requests, httpd.ignore_range, httpd.cut_next = {}, [], False, None
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


def _payload(n: int, seed: int = 0) -> bytes:
    return bytes((i * 31 + seed * 7 + (i >> 8)) % 251 for i in range(n))


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------------
# resumable HTTP


def test_download_file_writes_the_served_bytes_and_leaves_no_part_file(server, tmp_path):
    server.files["/a.bin"] = data = _payload(300_000)
    out = download_file(server.url + "/a.bin", tmp_path / "a.bin", retry_wait=0, timeout=5)
    assert out.read_bytes() == data
    assert not (tmp_path / "a.bin.part").exists()


def test_interrupted_part_file_is_resumed_with_a_range_request(server, tmp_path):
    server.files["/a.bin"] = data = _payload(200_000, seed=1)
    (tmp_path / "a.bin.part").write_bytes(data[:77_777])
    download_file(server.url + "/a.bin", tmp_path / "a.bin", retry_wait=0, timeout=5)
    assert (tmp_path / "a.bin").read_bytes() == data
    assert server.requests == [("/a.bin", "bytes=77777-")]


def test_connection_dropped_mid_transfer_resumes_where_it_broke(server, tmp_path):
    server.files["/a.bin"] = data = _payload(250_000, seed=2)
    server.cut_next = 100_000
    download_file(server.url + "/a.bin", tmp_path / "a.bin", retry_wait=0, timeout=5)
    assert (tmp_path / "a.bin").read_bytes() == data
    assert [r for _, r in server.requests] == [None, "bytes=100000-"]


def test_server_ignoring_range_restarts_instead_of_appending(server, tmp_path):
    server.files["/a.bin"] = data = _payload(50_000, seed=3)
    server.ignore_range = True
    (tmp_path / "a.bin.part").write_bytes(b"stale bytes from some other file")
    download_file(server.url + "/a.bin", tmp_path / "a.bin", retry_wait=0, timeout=5)
    assert (tmp_path / "a.bin").read_bytes() == data


def test_complete_part_file_is_accepted_on_http_416(server, tmp_path):
    server.files["/a.bin"] = data = _payload(10_000, seed=4)
    (tmp_path / "a.bin.part").write_bytes(data)
    download_file(server.url + "/a.bin", tmp_path / "a.bin", retry_wait=0, timeout=5)
    assert (tmp_path / "a.bin").read_bytes() == data


def test_http_404_is_a_final_error_naming_the_url(server, tmp_path):
    with pytest.raises(DownloadError, match=r"/missing\.bin: HTTP 404"):
        download_file(server.url + "/missing.bin", tmp_path / "m.bin", retry_wait=0, timeout=5)
    assert len(server.requests) == 1  # not retried


def test_non_http_urls_are_refused(tmp_path):
    with pytest.raises(ValueError, match="only http"):
        download_file("file:///etc/passwd", tmp_path / "x")


# ---------------------------------------------------------------------------------------------------
# lock file and sources


def _tar_gz(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def toy_source(server):
    inner = {"toy/images/a.jpg": _payload(1000, 5), "toy/captions.txt": b"a red cube\n"}
    server.files["/toy.tar.gz"] = archive = _tar_gz(inner)
    server.files["/meta.json"] = meta = b'{"n": 1}\n'
    sources = {
        "toy": {
            "licence": "CC0",
            "homepage": "http://127.0.0.1",
            "files": [
                {"path": "meta.json", "url": server.url + "/meta.json"},
                {"path": "toy.tar.gz", "url": server.url + "/toy.tar.gz", "unpack": {"into": "."}},
            ],
        }
    }
    return sources, {"meta.json": meta, "toy.tar.gz": archive}, inner


def test_first_download_records_sha256_size_and_source_and_unpacks(toy_source, tmp_path, server):
    sources, served, inner = toy_source
    lock_path = tmp_path / "lock.json"
    download_benchmark("toy", tmp_path / "d", lock_path, sources=sources, retry_wait=0)
    lock = json.loads(lock_path.read_text())["files"]
    assert set(lock) == {"toy/meta.json", "toy/toy.tar.gz"}
    for name, data in served.items():
        assert lock[f"toy/{name}"]["sha256"] == _sha(data)
        assert lock[f"toy/{name}"]["size"] == len(data)
        assert lock[f"toy/{name}"]["source"] == server.url + "/" + name
    for name, data in inner.items():
        assert (tmp_path / "d" / name).read_bytes() == data


def test_locally_altered_file_is_refused_naming_file_and_both_hashes(toy_source, tmp_path):
    sources, served, _ = toy_source
    lock_path = tmp_path / "lock.json"
    download_benchmark("toy", tmp_path / "d", lock_path, sources=sources, retry_wait=0)
    altered = b'{"n": 2}\n'
    (tmp_path / "d" / "meta.json").write_bytes(altered)
    with pytest.raises(ChecksumMismatchError) as info:
        download_benchmark("toy", tmp_path / "d", lock_path, sources=sources, retry_wait=0)
    message = str(info.value)
    assert "meta.json" in message and _sha(altered) in message and _sha(served["meta.json"]) in message


def test_upstream_change_after_locking_is_refused(toy_source, tmp_path, server):
    sources, served, _ = toy_source
    lock_path = tmp_path / "lock.json"
    download_benchmark("toy", tmp_path / "d", lock_path, sources=sources, retry_wait=0)
    (tmp_path / "d" / "meta.json").unlink()
    server.files["/meta.json"] = changed = b'{"n": 3, "republished": true}\n'
    with pytest.raises(ChecksumMismatchError) as info:
        download_benchmark("toy", tmp_path / "d", lock_path, sources=sources, retry_wait=0)
    assert _sha(changed) in str(info.value) and _sha(served["meta.json"]) in str(info.value)


def test_pinned_publisher_checksum_is_enforced_on_first_download(toy_source, tmp_path):
    sources, served, _ = toy_source
    sources["toy"]["files"][0]["sha256"] = "0" * 64
    with pytest.raises(ChecksumMismatchError, match="0{64}") as info:
        download_benchmark("toy", tmp_path / "d", tmp_path / "lock.json", sources=sources, retry_wait=0)
    assert _sha(served["meta.json"]) in str(info.value)


def test_second_call_reverifies_without_refetching(toy_source, tmp_path, server):
    sources, _, _ = toy_source
    download_benchmark("toy", tmp_path / "d", tmp_path / "lock.json", sources=sources, retry_wait=0)
    fetched = len(server.requests)
    download_benchmark("toy", tmp_path / "d", tmp_path / "lock.json", sources=sources, retry_wait=0)
    assert len(server.requests) == fetched


def test_manual_file_missing_raises_with_instructions_and_path(tmp_path):
    sources = {
        "gated": {
            "licence": "x",
            "homepage": "x",
            "files": [
                {
                    "path": "sa_000138.tar",
                    "manual": "accept the SA-1B licence first",
                    "satisfied_by": ["photos"],
                }
            ],
        }
    }
    with pytest.raises(ManualDownloadRequired, match="sa_000138.tar is missing.*accept the SA-1B licence"):
        download_benchmark("gated", tmp_path / "d", tmp_path / "lock.json", sources=sources)
    (tmp_path / "d" / "photos").mkdir(parents=True)
    (tmp_path / "d" / "photos" / "sa_1.jpg").write_bytes(b"x")
    download_benchmark("gated", tmp_path / "d", tmp_path / "lock.json", sources=sources)  # already unpacked


def test_manual_tar_placed_by_hand_is_locked_and_only_jpgs_unpacked_flat(tmp_path):
    inner = {"sa_1.jpg": b"jpg-one", "sa_1.json": b"{}", "./sub/sa_2.jpg": b"jpg-two"}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in inner.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    dest = tmp_path / "d"
    dest.mkdir()
    (dest / "sa_000138.tar").write_bytes(buf.getvalue())
    sources = load_sources()
    download_benchmark(
        "dci",
        dest,
        tmp_path / "lock.json",
        sources={"dci": {**sources["dci"], "files": [sources["dci"]["files"][1]]}},
    )
    photos = dest / "densely_captioned_images" / "photos"
    assert sorted(p.name for p in photos.iterdir()) == ["sa_1.jpg", "sa_2.jpg"]
    assert (photos / "sa_2.jpg").read_bytes() == b"jpg-two"
    lock = json.loads((tmp_path / "lock.json").read_text())["files"]
    assert lock["dci/sa_000138.tar"]["sha256"] == _sha(buf.getvalue())


def test_sources_table_states_each_licence_and_layout_evidence():
    sources = load_sources()
    assert set(sources) >= {"docci", "dci", "long_dci", "urban1k", "vg", "longclip_l"}
    assert "CC-BY-4.0" in sources["docci"]["licence"]
    assert "CC-BY-NC" in sources["dci"]["licence"]
    assert "non-commercial" in sources["urban1k"]["licence"]
    assert "CC-BY-4.0" in sources["vg"]["licence"]
    assert all(entry.get("evidence") for entry in sources.values())
    ckpt = sources["longclip_l"]["files"][0]["hub"]
    assert (ckpt["repo_id"], ckpt["filename"], ckpt["repo_type"]) == (
        "BeichenZhang/LongCLIP-L",
        "longclip-L.pt",
        "model",
    )


def test_unknown_source_lists_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match="unknown source 'nope'; known: .*docci"):
        download_benchmark("nope", tmp_path, tmp_path / "lock.json")


# ---------------------------------------------------------------------------------------------------
# archives


def _tar_with(member: tarfile.TarInfo, data: bytes = b"") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return buf.getvalue()


@pytest.mark.parametrize("name", ["../escape.txt", "/tmp/hnclip-abs-escape.txt", "a/../../escape.txt"])
def test_tar_member_outside_destination_is_refused(tmp_path, name):
    info = tarfile.TarInfo(name)
    info.size = 3
    archive = tmp_path / "evil.tar"
    archive.write_bytes(_tar_with(info, b"bad"))
    with pytest.raises(ArchiveError, match="outside"):
        unpack_archive(archive, tmp_path / "out")
    assert not (tmp_path / "escape.txt").exists()
    assert not Path("/tmp/hnclip-abs-escape.txt").exists()


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE])
def test_tar_links_are_refused(tmp_path, kind):
    info = tarfile.TarInfo("images/link.jpg")
    info.type, info.linkname = kind, "../../etc/passwd"
    archive = tmp_path / "links.tar"
    archive.write_bytes(_tar_with(info))
    with pytest.raises(ArchiveError, match="link"):
        unpack_archive(archive, tmp_path / "out")


def test_zip_member_outside_destination_is_refused(tmp_path):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("../escape.txt", "bad")
    with pytest.raises(ArchiveError, match="outside"):
        unpack_archive(archive, tmp_path / "out")
    assert not (tmp_path / "escape.txt").exists()


def test_truncated_tar_gz_is_detected(tmp_path):
    data = _tar_gz({f"images/{i}.jpg": _payload(40_000, i) for i in range(4)})
    archive = tmp_path / "cut.tar.gz"
    archive.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(ArchiveError, match="truncated or corrupt"):
        unpack_archive(archive, tmp_path / "out")


def test_tar_gz_missing_only_its_crc_trailer_is_detected(tmp_path):
    # every member reads fine; only draining the stream to its end reaches gzip's CRC/length check
    data = _tar_gz({"images/0.jpg": _payload(20_000)})
    archive = tmp_path / "cut.tar.gz"
    archive.write_bytes(data[:-4])
    with pytest.raises(ArchiveError, match="end of archive"):
        unpack_archive(archive, tmp_path / "out")


def test_truncated_plain_tar_is_detected_inside_a_member(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("big.bin")
        info.size = 100_000
        tar.addfile(info, io.BytesIO(_payload(100_000)))
    archive = tmp_path / "cut.tar"
    archive.write_bytes(buf.getvalue()[:60_000])
    with pytest.raises(ArchiveError, match="big.bin"):
        unpack_archive(archive, tmp_path / "out")


def test_truncated_zip_is_detected(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("Urban1k/caption/1.txt", "a caption")
    archive = tmp_path / "cut.zip"
    archive.write_bytes(buf.getvalue()[:-30])
    with pytest.raises(ArchiveError, match="truncated or corrupt zip"):
        unpack_archive(archive, tmp_path / "out")


def test_zip_with_corrupted_member_fails_its_crc(tmp_path):
    content = b"long caption text " * 50
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr("caption.txt", content)
    data = bytearray(buf.getvalue())
    at = data.find(content)
    data[at + 10] ^= 0xFF
    archive = tmp_path / "bad.zip"
    archive.write_bytes(bytes(data))
    with pytest.raises(ArchiveError, match="caption.txt"):
        unpack_archive(archive, tmp_path / "out")


def test_zip_unpack_skips_macos_metadata_and_keeps_content(tmp_path):
    archive = tmp_path / "u.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("Urban1k/caption/1.txt", "first caption")
        zf.writestr("Urban1k/image/._1.jpg", "apple double")
        zf.writestr("__MACOSX/Urban1k/image/._1.jpg", "apple double")
    assert unpack_archive(archive, tmp_path / "out") == 1
    assert (tmp_path / "out/Urban1k/caption/1.txt").read_text() == "first caption"
    assert not (tmp_path / "out/Urban1k/image/._1.jpg").exists()
    assert not (tmp_path / "out/__MACOSX").exists()


# ---------------------------------------------------------------------------------------------------
# Hugging Face Hub, through the real huggingface_hub code path on a pre-populated cache


def _populate_hub_cache(
    cache: Path, repo_type: str, repo_id: str, files: dict[str, bytes], commit: str
) -> None:
    """The layout huggingface_hub writes: blobs/<sha256>, snapshots/<commit>/<file> -> blob, refs/main."""
    populate_hub_cache(cache, repo_type, repo_id, files, commit)


# the offline Hub cache fixture `hub_cache` is conftest.py's


def _urban_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for n in (1, 2):
            zf.writestr(f"Urban1k/image/{n}.jpg", _tiny_jpeg(n))
            zf.writestr(f"Urban1k/caption/{n}.txt", f"city scene number {n}\n")
    return buf.getvalue()


def _tiny_jpeg(seed: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 6), (seed * 40 % 256, 80, 120)).save(buf, format="JPEG")
    return buf.getvalue()


def test_hub_zip_resolves_from_cache_offline_and_unpacks_to_a_loadable_urban1k(hub_cache, tmp_path):
    from hnclip.data.urban1k import load_urban1k

    commit = "a" * 40
    archive = _urban_zip()
    _populate_hub_cache(hub_cache, "dataset", "BeichenZhang/Urban1k", {"Urban1k.zip": archive}, commit)
    dest, lock_path = tmp_path / "urban1k", tmp_path / "lock.json"
    download_benchmark("urban1k", dest, lock_path)
    entry = json.loads(lock_path.read_text())["files"]["urban1k/Urban1k.zip"]
    assert entry["sha256"] == _sha(archive)
    assert entry["source"] == f"hf://datasets/BeichenZhang/Urban1k@{commit}/Urban1k.zip"
    manifest = load_urban1k(dest, "test", expected_count=None)
    assert list(manifest["caption"]) == ["city scene number 1", "city scene number 2"]


def test_hub_file_missing_from_offline_cache_is_a_download_error(hub_cache, tmp_path):
    with pytest.raises(DownloadError, match="BeichenZhang/Urban1k: cannot fetch 'Urban1k.zip'"):
        download_benchmark("urban1k", tmp_path / "u", tmp_path / "lock.json")


def test_hub_snapshot_places_every_repo_file_and_reverifies_without_the_hub(hub_cache, tmp_path):
    commit = "b" * 40
    files = {"dci_long.csv": b"filepath\ttitle\nsa_1.jpg\ta caption\n", "README.md": b"# Long-DCI\n"}
    _populate_hub_cache(hub_cache, "dataset", "mderakhshani/Long-DCI", files, commit)
    dest = tmp_path / "long_dci"
    (dest / "photos").mkdir(parents=True)
    (dest / "photos" / "sa_1.jpg").write_bytes(_tiny_jpeg(1))
    download_benchmark("long_dci", dest, tmp_path / "lock.json")
    lock = json.loads((tmp_path / "lock.json").read_text())["files"]
    for name, data in files.items():
        assert (dest / name).read_bytes() == data
        assert lock[f"long_dci/{name}"]["sha256"] == _sha(data)
    # later use: the cache is gone, the files are checked against the lock alone
    import shutil

    shutil.rmtree(hub_cache / "datasets--mderakhshani--Long-DCI")
    download_benchmark("long_dci", dest, tmp_path / "lock.json")
    (dest / "dci_long.csv").write_bytes(b"filepath\ttitle\nsa_1.jpg\tedited\n")
    with pytest.raises(ChecksumMismatchError, match="dci_long.csv"):
        download_benchmark("long_dci", dest, tmp_path / "lock.json")


def test_checkpoint_is_fetched_from_the_model_cache(hub_cache, tmp_path):
    weights = _payload(5000, 9)
    _populate_hub_cache(hub_cache, "model", "BeichenZhang/LongCLIP-L", {"longclip-L.pt": weights}, "c" * 40)
    path = download_checkpoint(tmp_path / "ckpt", tmp_path / "lock.json")
    assert path == tmp_path / "ckpt" / "longclip-L.pt"
    assert path.read_bytes() == weights


def test_hub_token_comes_from_env_and_is_never_logged(hub_cache, tmp_path, monkeypatch, caplog):
    secret = "hf_" + "S3cr3tT0k3n" * 3
    monkeypatch.setenv("HF_TOKEN", secret)
    assert transport._hub_options()["token"] == secret
    monkeypatch.delenv("HF_TOKEN")
    assert transport._hub_options()["token"] is False  # never a token stored on disk
    monkeypatch.setenv("HF_TOKEN", secret)
    _populate_hub_cache(hub_cache, "dataset", "BeichenZhang/Urban1k", {"Urban1k.zip": _urban_zip()}, "d" * 40)
    with caplog.at_level(logging.DEBUG):
        download_benchmark("urban1k", tmp_path / "u", tmp_path / "lock.json")
        with pytest.raises(DownloadError) as info:
            download_benchmark("long_dci", tmp_path / "l", tmp_path / "lock.json")
    assert secret not in caplog.text and secret not in str(info.value)
    assert secret not in (tmp_path / "lock.json").read_text()


# ---------------------------------------------------------------------------------------------------
# Karpathy's splits (coco, flickr30k): the sources table's files served from the loopback server


def _karpathy_zip() -> tuple[bytes, dict]:
    """caption_datasets.zip with the three split files at its top level, as Karpathy's page serves it."""
    files = {name: json.dumps({"images": [], "dataset": name}).encode()
             for name in ("dataset_coco.json", "dataset_flickr8k.json", "dataset_flickr30k.json")}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue(), files


def _served(sources: dict, name: str, server) -> dict:
    """Source ``name`` of the real table with each URL's host replaced by the loopback server."""
    entry = json.loads(json.dumps(sources[name]))
    for spec in entry["files"]:
        if "url" in spec:
            spec["url"] = server.url + "/" + spec["url"].rsplit("/", 1)[1]
    return {name: entry}


def test_coco_fetches_karpathys_archive_and_val2014_unpacking_only_its_split_file(tmp_path, server):
    sources = load_sources()
    assert sources["coco"]["files"][0]["url"] == "https://cs.stanford.edu/people/karpathy/deepimagesent/caption_datasets.zip"
    assert sources["coco"]["files"][1]["url"] == "http://images.cocodataset.org/zips/val2014.zip"
    archive, inner = _karpathy_zip()
    photo = _tiny_jpeg(3)
    val = io.BytesIO()
    with zipfile.ZipFile(val, "w") as zf:
        zf.writestr("val2014/COCO_val2014_000000000011.jpg", photo)
    server.files["/caption_datasets.zip"], server.files["/val2014.zip"] = archive, val.getvalue()
    dest = tmp_path / "coco"
    download_benchmark("coco", dest, tmp_path / "lock.json", sources=_served(sources, "coco", server), retry_wait=0)
    assert (dest / "dataset_coco.json").read_bytes() == inner["dataset_coco.json"]
    assert not (dest / "dataset_flickr30k.json").exists() and not (dest / "dataset_flickr8k.json").exists()
    assert (dest / "val2014" / "COCO_val2014_000000000011.jpg").read_bytes() == photo
    lock = json.loads((tmp_path / "lock.json").read_text())["files"]
    assert lock["coco/caption_datasets.zip"]["sha256"] == _sha(archive)
    assert lock["coco/val2014.zip"]["sha256"] == _sha(val.getvalue())


def test_flickr30k_needs_its_photos_by_hand_and_fetches_karpathys_file(tmp_path, server):
    sources = load_sources()
    archive, inner = _karpathy_zip()
    server.files["/caption_datasets.zip"] = archive
    served = _served(sources, "flickr30k", server)
    dest = tmp_path / "f30k"
    with pytest.raises(ManualDownloadRequired, match="flickr30k-images.tar.gz is missing.*request form"):
        download_benchmark("flickr30k", dest, tmp_path / "lock.json", sources=served, retry_wait=0)
    (dest / "flickr30k-images").mkdir(parents=True, exist_ok=True)
    (dest / "flickr30k-images" / "1000092795.jpg").write_bytes(_tiny_jpeg(4))
    download_benchmark("flickr30k", dest, tmp_path / "lock.json", sources=served, retry_wait=0)
    assert (dest / "dataset_flickr30k.json").read_bytes() == inner["dataset_flickr30k.json"]
    assert not (dest / "dataset_coco.json").exists()
