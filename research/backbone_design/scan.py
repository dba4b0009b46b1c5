"""Zero-shot regime figures of a saved backbone over benchmark slice variants (no fine-tuning)."""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bb  # noqa: E402
import data  # noqa: E402

torch.set_num_threads(1)
model = torch.load(sys.argv[1], weights_only=False)
variants = json.loads(sys.argv[2])
for v in variants:
    bench = data.benchmark(
        image_size=48, n_train=1536, n_val=512, n_test=0, **{k: v[k] for k in v if k != "no_test"}
    )
    s = float(model.scale())
    fi, ft = bb.encode(model, bench["val_img"], bench["val_tok"])
    val = bb.r_at_1(fi, ft)
    tri, trt = bb.encode(model, bench["train_img"], bench["train_tok"])
    geo = bb.batch_figures(tri, trt, s)
    print(
        "SCAN", sys.argv[1], json.dumps(v), json.dumps(dict(val=val, eff=bb.eff_dims(trt), **geo)), flush=True
    )
