"""CPU kernel pinning: meant to make the embedded default train the same weights on any x86-64 machine with AVX2.

Why. torch picks its CPU kernels by the instruction set of the machine it runs on: its own vectorised
ops (ATen's dispatch: AVX512 where the CPU has it, else AVX2), MKL's BLAS and oneDNN's convolutions
and matmuls each choose a code path per CPU, and the paths round differently. Measured on this
project's 2-core Xeon (AVX512, 2026-12-02): 20 AdamW steps of the toy backbone give four different
weight hashes with the native kernels, ATen at AVX2, ATen and MKL at AVX2, and all three at AVX2, each
setting bit-identical over reruns. Over the thousands of steps of the toy's backbone pretraining such a
rounding difference grows into a different model, the likely cause (the other VM's CPU flags were not
recorded) of two sessions getting zero-shot test R@1 31.5 / 28.1 and 43.1 / 44.4 from the same commit
(benchmarks/README.md in git history, "toy_slice.py"; docs/toy-design.md).

``cpu_kernels: avx2`` (the embedded default) caps all three at AVX2, which every x86-64 CPU since
2013 has: ``ATEN_CPU_CAPABILITY=avx2``, ``MKL_CBWR=AVX2`` (MKL's conditional numerical
reproducibility: the same results on any CPU that runs its AVX2 path, for a fixed thread count) and
``ONEDNN_MAX_CPU_ISA=AVX2``. It is meant to give the same weights on every x86-64 machine with AVX2
at the config's thread counts. Across two machines it did not (2026-12-03): an Intel Xeon VM and an AMD
EPYC VM pretrained different toy backbones under it (zero-shot test R@1 24.1 / 25.9 and 46.0 / 39.6),
cause not traced; ``benchmarks/kernel_hash.py`` prints a fingerprint to compare machines by. The pin still
holds within one machine (each library sees it, and reruns are bit-identical: tests/test_cpu_kernels.py).
What stays machine-dependent: a CPU without AVX2 or not x86-64 (an ARM laptop: no MKL; the pin is then
not applied, with a warning, and the numbers may differ), and oneDNN's choices by cache size, which its
documentation does not pin. ``native``
(config/paper.yaml: a GPU run's numbers depend on its GPU anyway) leaves the machine's own.

``portable`` asks every library for its most portable path: ATen's scalar kernels
(``ATEN_CPU_CAPABILITY=default``), MKL's COMPATIBLE branch (``MKL_CBWR=COMPATIBLE``, which MKL documents
as giving the same results on every Intel and compatible CPU at a fixed thread count) and oneDNN switched
off in torch (``torch.backends.mkldnn.enabled = False``: convolutions through ATen and MKL, GELU through
ATen), because oneDNN has no portable path to ask for. torch has no variable for the last, so
:func:`configure_torch` sets it after torch loads (``python -m hnclip`` calls it). Measured on the Intel
Xeon VM (2026-12-04, benchmarks/README.md, "kernel_hash.py"): 1.9x the pin's time on the toy backbone's
steps. Whether two CPUs give the same weights under it is not yet measured (each setting's weights on
one machine only); it is there to be compared, not the default.
The cost of the pin on this machine: benchmarks/README.md ("kernel_hash.py").

The workflow exports the setting as :data:`ENV_SETTING` for every job (workflow/rules/common.smk), and
``python -m hnclip`` applies it (:func:`apply`) before anything imports torch: each variable is read when
its library first runs a kernel, so setting it later in the process would not take effect.
"""

from __future__ import annotations

import os
import platform
import warnings
from pathlib import Path

__all__ = ["ENV_SETTING", "ONEDNN_OFF", "PINS", "SETTINGS", "apply", "configure_torch", "cpu_has_avx2",
           "cpu_name", "describe", "kernel_environment"]

ENV_SETTING = "HNCLIP_CPU_KERNELS"  # the config's cpu_kernels, as the workflow exports it to each job
# what each setting exports: ATen's dispatch, MKL's code path, oneDNN's instruction-set cap
PINS: dict[str, dict[str, str]] = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "portable": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"},
}
ONEDNN_OFF = frozenset({"portable"})  # settings that also switch oneDNN off in torch (configure_torch)
SETTINGS = tuple(PINS)
# every variable a setting may set, what describe() records
PIN_VARIABLES = tuple(dict.fromkeys(name for pins in PINS.values() for name in pins))


def _cpuinfo(cpuinfo: Path) -> tuple[str, list[str]] | None:
    """The first CPU's model name and flags from /proc/cpuinfo, None where it cannot be read (e.g. macOS)."""
    try:
        lines = cpuinfo.read_text().splitlines()
    except OSError:
        return None
    name = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), [])
    return name, flags


def cpu_has_avx2(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this is an x86-64 CPU whose flags list ``avx2`` (read from /proc/cpuinfo; False where it
    cannot be read, e.g. macOS: the pin is then not applied, with a warning)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    info = _cpuinfo(cpuinfo)
    return info is not None and "avx2" in info[1]


def cpu_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's model name and whether it has AVX512 and AVX2 (from /proc/cpuinfo; the platform's processor
    string where there is none): which machine computed a run, since the weights depend on it."""
    info = _cpuinfo(cpuinfo)
    if info is None:
        return platform.processor() or platform.machine()
    name, flags = info
    return f"{name} ({'AVX512' if 'avx512f' in flags else 'no AVX512'}, {'AVX2' if 'avx2' in flags else 'no AVX2'})"


def kernel_environment(setting: str, has_avx2: bool | None = None) -> dict[str, str]:
    """The environment variables ``setting`` sets on this machine (empty where it cannot apply)."""
    if setting not in PINS:
        raise ValueError(f"cpu_kernels {setting!r} is not a setting; known: {', '.join(SETTINGS)}")
    pins = PINS[setting]
    if setting == "avx2" and not (cpu_has_avx2() if has_avx2 is None else has_avx2):
        warnings.warn(f"cpu_kernels {setting!r}: this CPU ({platform.machine()}) has no AVX2, so its kernels "
                      "are not pinned and its numbers may differ from another machine's", stacklevel=2)
        return {}
    return dict(pins)


def apply(setting: str | None = None, environ=os.environ) -> dict[str, str]:
    """Set the variables of ``setting`` (default: ``environ[ENV_SETTING]``, nothing when unset) in
    ``environ``, leaving any a user set by hand; returns what was set. Call before torch is imported."""
    setting = setting if setting is not None else environ.get(ENV_SETTING)
    if not setting:
        return {}
    applied = {}
    for name, value in kernel_environment(setting).items():
        if name not in environ:
            environ[name] = value
            applied[name] = value
    return applied


def configure_torch(setting: str | None = None, environ=os.environ) -> bool:
    """Switch torch's oneDNN off where ``setting`` (default: ``environ[ENV_SETTING]``) asks for it
    (:data:`ONEDNN_OFF`); call after :func:`apply`. Imports torch only then. Returns whether it did."""
    setting = setting if setting is not None else environ.get(ENV_SETTING)
    if setting not in ONEDNN_OFF:
        return False
    import torch

    torch.backends.mkldnn.enabled = False
    return True


def describe(environ=os.environ) -> dict[str, str | bool | None]:
    """What a run's numbers were computed with, for its ``summary.json``: the setting, torch's kernel
    capability as it dispatches now, the pin variables as the process saw them, whether torch runs oneDNN
    and the CPU (:func:`cpu_name`)."""
    import torch

    return {"setting": environ.get(ENV_SETTING) or "native", "capability": torch.backends.cpu.get_cpu_capability(),
            **{name: environ.get(name) for name in PIN_VARIABLES}, "onednn": bool(torch.backends.mkldnn.enabled),
            "cpu": cpu_name()}
