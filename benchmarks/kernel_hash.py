"""Does this machine train the same weights as another? A fingerprint to compare across machines.

Why. ``cpu_kernels: avx2`` (``hnclip.cpu_kernels``) is meant to make the embedded default's backbone the same
on every x86-64 machine with AVX2, and two machines disagreed under it (README, "What the embedded default
shows": zero-shot 24.1 / 25.9 on an Intel Xeon VM, 46.0 / 39.6 on an AMD EPYC VM, same code). This script
prints, per kernel setting, a hash of the weights after a few AdamW steps of a small net that runs a
oneDNN convolution, MKL matmuls and ATen's vectorised GELU / LayerNorm / softmax, each step in a fresh
process (each library reads its variable once, at its first kernel). Run it on two machines and compare
the lines: a pinned setting whose hash differs between them is the pin not holding there, and which of
the settings first differs says which library decides.

    .venv/bin/python benchmarks/kernel_hash.py [--steps 20] [--threads 1]
    .venv/bin/python benchmarks/kernel_hash.py --quick   # 2 steps, the first two settings: a smoke run

It prints the CPU model, whether it has AVX512, torch's version and, per setting, torch's kernel
capability, the net's hash and one hash per library on fixed inputs (forward and backward each): ``mm``
a float32 matmul (MKL's sgemm), ``conv`` a convolution through oneDNN, ``conv-ref`` the same convolution
with oneDNN switched off (ATen's im2col and MKL), ``aten`` ATen's own vectorised GELU, LayerNorm, softmax,
exp and sum. Two machines whose net hashes differ under a setting but agree on some columns have the
difference in the others. The last setting, ``portable``, asks every library for its most portable path
(ATen's scalar kernels, MKL's COMPATIBLE branch, oneDNN off): if any setting gives the same line on two
machines, it is that one.

``--backbone DIR`` (e.g. ``results/backbone/model``) adds what each setting costs the toy: 20 AdamW steps
of that model on 32 random images against 32 captions, one thread, a fresh process per setting, their
seconds three times over (interleaved) and the ratio of each setting's median to the avx2 pin's.
``--weights DIR [DIR ...]`` prints instead a hash of each saved model's tensors (safetensors, by name):
``results/backbone/model`` from two machines under the same ``cpu_kernels`` is the comparison that counts.
Results: benchmarks/README.md, "cpu_kernels".
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))  # this checkout's hnclip, whatever the environment has installed


def settings() -> dict[str, dict[str, str]]:
    """Label -> environment: native, then hnclip's avx2 pin (``cpu_kernels.PINS``) one library at a time and
    with oneDNN off, then ATen's and MKL's most portable paths, alone and with oneDNN off (``cpu_kernels:
    portable``)."""
    from hnclip.cpu_kernels import PINS

    out, pinned = {"native": {}}, {}
    for name, value in PINS["avx2"].items():
        pinned = {**pinned, name: value}
        out[("+ " if len(pinned) > 1 else "") + f"{name}={value}"] = dict(pinned)
    out["+ oneDNN off (torch.backends.mkldnn)"] = {**pinned, ONEDNN_OFF: "1"}
    out[" ".join(f"{k}={v}" for k, v in PINS["portable"].items())] = dict(PINS["portable"])
    out["portable (cpu_kernels: portable): + oneDNN off"] = {**PINS["portable"], ONEDNN_OFF: "1"}
    return out


ONEDNN_OFF = "KERNEL_HASH_ONEDNN_OFF"  # read by the child: torch.backends.mkldnn.enabled = False

TRAIN = textwrap.dedent("""
    import hashlib, os, sys
    import torch
    steps, threads = int(sys.argv[1]), int(sys.argv[2])
    torch.backends.mkldnn.enabled = not os.environ.get("KERNEL_HASH_ONEDNN_OFF")
    torch.manual_seed(0)
    torch.set_num_threads(threads)

    net = torch.nn.Sequential(torch.nn.Conv2d(3, 64, 4, stride=4), torch.nn.GELU(), torch.nn.Flatten(),
                              torch.nn.LayerNorm(64 * 16), torch.nn.Linear(64 * 16, 256), torch.nn.GELU(),
                              torch.nn.Linear(256, 128))
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.1)
    images, texts = torch.randn(64, 3, 16, 16), torch.randn(64, 128)
    labels = torch.arange(64)
    for _ in range(steps):
        features = torch.nn.functional.normalize(net(images), dim=-1)
        logits = 20 * features @ torch.nn.functional.normalize(texts, dim=-1).T
        loss = torch.nn.functional.cross_entropy(logits, labels) + torch.nn.functional.cross_entropy(logits.T, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    def digest(tensors, width=8):
        return hashlib.sha256(b"".join(t.detach().contiguous().numpy().tobytes() for t in tensors)).hexdigest()[:width]

    def forward_backward(fn, *inputs):
        leaves = [x.clone().requires_grad_(True) for x in inputs]
        out = fn(*leaves)
        out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape))
        return [out] + [x.grad for x in leaves]

    torch.manual_seed(1)  # after the net: its hash stays comparable with lines printed before the columns
    a, b = torch.randn(96, 200), torch.randn(200, 72)
    image, kernel = torch.randn(8, 3, 16, 16), torch.randn(64, 3, 4, 4)
    conv = lambda x, w: torch.nn.functional.conv2d(x, w, stride=4)
    x = torch.randn(64, 300)
    columns = {"mm": digest(forward_backward(torch.matmul, a, b)),
               "conv": digest(forward_backward(conv, image, kernel))}
    enabled = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    columns["conv-ref"] = digest(forward_backward(conv, image, kernel))
    torch.backends.mkldnn.enabled = enabled
    columns["gelu"] = digest(forward_backward(torch.nn.functional.gelu, x))
    columns["norm"] = digest(forward_backward(lambda y: torch.nn.functional.layer_norm(y, y.shape[-1:]), x))
    columns["softmax"] = digest(forward_backward(lambda y: y.softmax(-1), x))
    columns["exp"] = digest(forward_backward(torch.exp, x))
    print(torch.backends.cpu.get_cpu_capability(), torch.__version__, digest(list(net.parameters()), 16),
          *columns.values())
""")

STEPS = textwrap.dedent("""
    import os, sys, time
    import torch
    torch.backends.mkldnn.enabled = not os.environ.get("KERNEL_HASH_ONEDNN_OFF")
    torch.set_num_threads(1)
    sys.path.insert(0, sys.argv[2])
    from hnclip.models import load_model
    model = load_model(sys.argv[1])
    model.train()
    torch.manual_seed(0)
    side = int(model.image_size[0])
    images = torch.randn(32, 3, side, side)
    tokens = model.tokenize([f"a scene with {i} red circles left of a blue square" for i in range(32)])
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    labels = torch.arange(32)
    start = time.perf_counter()
    for _ in range(20):
        v = torch.nn.functional.normalize(model.encode_image(images), dim=-1)
        t = torch.nn.functional.normalize(model.encode_text(tokens), dim=-1)
        logits = 50 * v @ t.T
        loss = torch.nn.functional.cross_entropy(logits, labels) + torch.nn.functional.cross_entropy(logits.T, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(time.perf_counter() - start)
""")


def main(argv: list[str] | None = None) -> None:
    from hnclip.cpu_kernels import cpu_name

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--backbone", type=Path, default=None,
                        help="a saved model (results/backbone/model): time 20 of its steps per setting")
    parser.add_argument("--weights", type=Path, nargs="+", default=None, metavar="DIR",
                        help="saved models (results/backbone/model): print a hash of each one's tensors and stop")
    parser.add_argument("--quick", action="store_true", help="2 steps under the first two settings: a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps = 2
    if args.weights:
        from hnclip.hashing import weights_digest

        for folder in args.weights:
            try:
                print(f"{weights_digest(folder)}  {folder}")
            except FileNotFoundError as error:
                raise SystemExit(f"kernel_hash.py --weights: {error}") from None
        return
    print(f"cpu: {cpu_name()}; {args.steps} AdamW steps, {args.threads} thread(s), a fresh process per setting")
    from hnclip.cpu_kernels import ENV_SETTING

    runs = settings()
    pinned = {name for env in runs.values() for name in env}
    if args.quick:
        runs = dict(list(runs.items())[:2])
    print(f"  {'setting':48s} {'capability':10s} {'torch':18s} {'net':16s} {'mm':8s} {'conv':8s} "
          f"{'conv-ref':8s} {'gelu':8s} {'norm':8s} {'softmax':8s} {'exp':8s}")
    for label, env in runs.items():
        environ = {k: v for k, v in os.environ.items() if k not in pinned and k != ENV_SETTING}
        environ.update(env)
        out = subprocess.run([sys.executable, "-c", TRAIN, str(args.steps), str(args.threads)], env=environ,
                             capture_output=True, text=True, check=True).stdout.split()
        capability, torch_version, *digests = out
        print(f"  {label:48s} {capability:10s} {torch_version:18s} {' '.join(digests)}")
    if args.backbone is not None:
        time_backbone(args.backbone, runs, pinned)


def time_backbone(backbone: Path, runs: dict[str, dict[str, str]], pinned: set[str], rounds: int = 3) -> None:
    """Seconds of 20 training steps of ``backbone`` per setting (``rounds`` interleaved rounds, a fresh
    process each) and each setting's median over the avx2 pin's (``cpu_kernels: avx2``, the default)."""
    from hnclip.cpu_kernels import ENV_SETTING, PINS

    seconds: dict[str, list[float]] = {label: [] for label in runs}
    for _ in range(rounds):
        for label, env in runs.items():
            environ = {k: v for k, v in os.environ.items() if k not in pinned and k != ENV_SETTING}
            environ.update(env)
            out = subprocess.run([sys.executable, "-c", STEPS, str(backbone), str(SRC)], env=environ,
                                 capture_output=True, text=True, check=True).stdout.split()
            seconds[label].append(float(out[-1]))
    pin = next(label for label, env in runs.items() if env == PINS["avx2"])
    reference = statistics.median(seconds[pin])
    print(f"20 training steps of {backbone} (batch 32, 1 thread), seconds over {rounds} interleaved rounds")
    for label, values in seconds.items():
        print(f"  {label:48s} {' '.join(f'{v:5.2f}' for v in values)}   x{statistics.median(values) / reference:.2f}"
              + ("  (the pin)" if label == pin else ""))


if __name__ == "__main__":
    main()
