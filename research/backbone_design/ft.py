"""Fine-tune probes of a saved backbone on benchmark variants: zero-shot figures, then plain FT per lr."""

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
lrs = [float(x) for x in sys.argv[3].split(",")]
for v in variants:
    bench = data.benchmark(image_size=48, **v)
    res = bb.measure(model, bench, json.dumps(v))
    for lr in lrs:
        bb.finetune_probe(model, bench, lr=lr, tag=json.dumps(v))
