"""The job of ``hnclip regime``: encode what the regime conditions need and write
``results/regime/<benchmark>.json``.

Glue only (models, encoding, files); every number is computed by :mod:`hnclip.analysis.regime` from
the arrays this module hands it.

Why the models are loaded here rather than their retrieval stored in the evaluation records: two
conditions need more than a rank per query. Condition 6 compares each test scene with its hardest
near-duplicate, which needs the fine-tuned models' features; with those features in hand, the top-1
item of every query (condition 2) costs one more argmax over the score matrix an evaluation already
computes. The backbone's and the plain runs' test splits are encoded once each (a few seconds for the
toy, about a minute per ViT-L model on a GPU for 5,000 DOCCI scenes), and the existing evaluation
records stay as they are: no evaluation reruns, and records written before this verb serve it. The
ranks recomputed here are compared with the records' (``rank_agreement``): a model that does not
reproduce its own evaluation shows up there.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

__all__ = ["backbone_identity", "encode_test_split", "run_regime"]


def encode_test_split(model_dir: Path, manifest, store, device, caption_column: str = "caption"):
    """:class:`hnclip.analysis.regime.ModelFeatures` of a saved model on a test split (global features,
    fp32, the score :mod:`hnclip.evaluate` ranks a model without its own score by)."""
    from hnclip.analysis.regime import ModelFeatures
    from hnclip.evaluate import encode_split
    from hnclip.framework_loading import load_framework
    from hnclip.models import load_model

    model = load_model(model_dir)
    framework = load_framework(model_dir, model)
    if framework is not None and framework.has_score:
        raise ValueError(f"model {model_dir}: its framework scores retrieval with its own score; the regime "
                         f"conditions read the global cosine of plain (Long-CLIP) fine-tuning only")
    model = model.to(device)
    images, texts = encode_split(model, manifest, store, device=device, caption_column=caption_column)
    return ModelFeatures(images.double().numpy(), texts.double().numpy())


def _agreement(features, record, text_image) -> dict[str, float]:
    """Share of queries whose recomputed R@1 hit equals the evaluation record's, per direction."""
    from hnclip.analysis.regime import rank_and_top1

    ranks = record.get("ranks")
    if not ranks:
        return {}
    ours = rank_and_top1(features.images, features.texts, text_image)
    return {d: float(np.mean((ours[f"{d}_rank"] == 0) == (np.asarray(ranks[d]) == 0))) for d in ("i2t", "t2i")}


def backbone_identity(backbone: Path) -> dict:
    """Which backbone the conditions were measured on: its weight digest (:func:`hnclip.hashing.weights_digest`)
    and, for a released backbone (its ``release.json``, installed beside the weights) or a pretrained one (its
    training ``summary.json`` beside the folder), the release's name and the CPU kernels and CPU that built it.
    Why: a CPU-pretrained backbone depends on the CPU (hnclip.cpu_kernels), and the conditions depend on the
    backbone, so a reader must be able to tell two machines' regimes apart."""
    from hnclip.hashing import weights_digest
    from hnclip.model_files import RELEASE_FILE

    try:
        weights = weights_digest(backbone)
    except FileNotFoundError:
        weights = None
    release_path = Path(backbone) / RELEASE_FILE
    if release_path.is_file():
        release = json.loads(release_path.read_text())
        return {"weights": weights, "cpu_kernels": release["built"].get("cpu_kernels"), "release": release["name"]}
    summary_path = Path(backbone).parent / "summary.json"
    kernels = json.loads(summary_path.read_text()).get("cpu_kernels") if summary_path.is_file() else None
    return {"weights": weights, "cpu_kernels": kernels}


def run_regime(benchmark: str, backbone: Path, train_manifest: Path, test_manifest: Path, test_images: Path,
               zeroshot_eval: Path, run_dirs: list[Path], eval_paths: list[Path], out_json: Path,
               main_spec: Path | None = None, settings=None, device: str = "auto",
               caption_column: str = "caption", transfer_evals: list[Path] = ()) -> dict:
    from hnclip.analysis.bootstrap import BootstrapSettings
    from hnclip.analysis.geometry_job import encode_captions
    from hnclip.analysis.records import load_eval, load_spec
    from hnclip.analysis.regime import BASELINE_METHOD, HN_METHOD, load_plain_runs, regime_report
    from hnclip.data.image_store import ImageStore
    from hnclip.data.manifest import read_manifest
    from hnclip.evaluate import _unique_images, resolve_device
    from hnclip.fileio import write_json_atomic
    from hnclip.models import load_model

    settings = settings or BootstrapSettings()
    device = resolve_device(device)
    plain = load_plain_runs(run_dirs, eval_paths, benchmark)
    zeroshot_record = load_eval(zeroshot_eval)
    train = read_manifest(train_manifest)
    test = read_manifest(test_manifest)
    store = ImageStore(test_images)
    _, text_image = _unique_images(test)
    text_image = text_image.numpy()

    model = load_model(backbone).to(device)
    train_features = encode_captions(model, [str(c) for c in train[caption_column]], device=device).double().numpy()
    logit_scale = float(model.scale().detach())  # what the trainer uses
    del model
    zeroshot = encode_test_split(backbone, test, store, device, caption_column)
    agreement = {"zeroshot": _agreement(zeroshot, zeroshot_record, text_image)}
    for run in plain:
        run.features = encode_test_split(Path(run.run_dir) / "model", test, store, device, caption_column)
        agreement[run.seed] = _agreement(run.features, run.record, text_image)
        log.info("%s: encoded the test split", run.run_dir)

    main_records, main_evals, competitor, labels = None, [], None, {}
    if main_spec is not None:
        spec = load_spec(main_spec)
        competitor = (spec.get("roles") or {}).get("competitor")
        main_records = {HN_METHOD: [], BASELINE_METHOD: [], **({competitor: []} if competitor else {})}
        labels = {cell["run"]["method"]: cell["row"] for cell in spec["cells"] if not cell.get("zeroshot")}
        for cell in spec["cells"]:
            method = cell["run"]["method"]
            if method in main_records and cell["eval_benchmark"] == benchmark and not cell.get("zeroshot"):
                main_records[method].append((str(cell["run"]["seed"]), load_eval(cell["eval_path"])))
                main_evals.append(cell["eval_path"])
    transfer = {}
    for path in transfer_evals:
        record = load_eval(path)
        transfer[record["eval_benchmark"]] = (record, str(path))
    report = regime_report(
        benchmark, plain, zeroshot_record, zeroshot, train_features, text_image, main_records, settings,
        sources={"zeroshot": str(zeroshot_eval), "train_manifest": str(train_manifest), "backbone": str(backbone),
                 "main_spec": str(main_spec) if main_spec else "", "main_evals": main_evals},
        agreement={k: v for k, v in agreement.items() if v}, logit_scale=logit_scale, transfer=transfer,
        competitor=competitor)
    for compared in report["comparisons"].values():
        if compared:
            compared["against_label"] = labels.get(compared["against"], compared["against"])
    report.update(backbone=str(backbone), train_manifest=str(train_manifest), test_manifest=str(test_manifest),
                  backbone_identity=backbone_identity(backbone))
    write_json_atomic(Path(out_json), report)
    for c in report["conditions"]:
        log.info("%s: %s (target %s) -> %s", c["key"], c["ours"], c["target"], c["decision"])
    return report
