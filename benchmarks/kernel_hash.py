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

It prints the CPU model, whether it has AVX512, torch's version and, per setting, torch's kernel
capability and the hash. Results: benchmarks/README.md, "cpu_kernels".
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path


def settings() -> dict[str, dict[str, str]]:
    """Label -> environment: native, then hnclip's avx2 pin (``cpu_kernels.PINS``) one library at a time,
    then ATen's and MKL's most portable paths."""
    from hnclip.cpu_kernels import PINS

    out, pinned = {"native": {}}, {}
    for name, value in PINS["avx2"].items():
        pinned = {**pinned, name: value}
        out[("+ " if len(pinned) > 1 else "") + f"{name}={value}"] = dict(pinned)
    out["ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE"] = {"ATEN_CPU_CAPABILITY": "default",
                                                              "MKL_CBWR": "COMPATIBLE"}
    return out

TRAIN = textwrap.dedent("""
    import hashlib, sys
    import torch
    steps, threads = int(sys.argv[1]), int(sys.argv[2])
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
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in net.parameters())).hexdigest()
    print(torch.backends.cpu.get_cpu_capability(), torch.__version__, digest[:16])
""")


def cpu_model() -> str:
    """The CPU's model name and whether it has AVX512 (from /proc/cpuinfo where there is one)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    name = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return f"{name} ({'AVX512' if 'avx512f' in flags else 'no AVX512'}, {'AVX2' if 'avx2' in flags else 'no AVX2'})"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    print(f"cpu: {cpu_model()}; {args.steps} AdamW steps, {args.threads} thread(s), a fresh process per setting")
    from hnclip.cpu_kernels import ENV_SETTING

    runs = settings()
    pinned = {name for env in runs.values() for name in env}
    for label, env in runs.items():
        environ = {k: v for k, v in os.environ.items() if k not in pinned and k != ENV_SETTING}
        environ.update(env)
        out = subprocess.run([sys.executable, "-c", TRAIN, str(args.steps), str(args.threads)], env=environ,
                             capture_output=True, text=True, check=True).stdout.split()
        capability, torch_version, digest = out
        print(f"  {label:48s} capability {capability:7s} torch {torch_version}  {digest}")


if __name__ == "__main__":
    main()
