"""cpu_kernels: the pin reaches torch, MKL and oneDNN when applied in-process before torch loads, exactly
as when the three variables come from the shell, and (on a CPU above AVX2) it changes the numbers."""

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from hnclip import cpu_kernels

SRC = Path(__file__).resolve().parents[1] / "src"
PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
PORTABLE = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}

# ten AdamW steps of a net that runs a oneDNN convolution, MKL matmuls and ATen's vectorised
# GELU/LayerNorm; prints torch's kernel capability and a hash of the weights
TRAIN = textwrap.dedent("""
    import hashlib, sys
    if sys.argv[1] != "-":
        from hnclip import cpu_kernels
        cpu_kernels.apply(sys.argv[1])
    import torch
    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 4, stride=4), torch.nn.GELU(), torch.nn.Flatten(),
                              torch.nn.LayerNorm(512), torch.nn.Linear(512, 64))
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
    x, y = torch.randn(64, 3, 16, 16), torch.randint(0, 64, (64,))
    for _ in range(10):
        loss = torch.nn.functional.cross_entropy(net(x) @ net(x).T / 8, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in net.parameters())).hexdigest()
    print(torch.backends.cpu.get_cpu_capability(), digest)
""")


def _train(tmp_path, setting: str, extra_env: dict | None = None) -> tuple[str, str]:
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    env = {k: v for k, v in os.environ.items() if k not in PINNED and k != cpu_kernels.ENV_SETTING}
    env.update(PYTHONPATH=str(SRC), **(extra_env or {}))
    out = subprocess.run([sys.executable, str(script), setting], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    return out[0], out[1]


def test_settings_export_the_three_variables_or_nothing():
    assert cpu_kernels.kernel_environment("native") == {}
    assert cpu_kernels.kernel_environment("avx2", has_avx2=True) == PINNED
    assert cpu_kernels.kernel_environment("portable", has_avx2=False) == PORTABLE  # no AVX2 path asked for
    with pytest.raises(ValueError, match="'avx512'.*known: native, avx2, portable"):
        cpu_kernels.kernel_environment("avx512")


@pytest.mark.slow  # a fresh interpreter per kernel setting
def test_only_portable_switches_onednn_off_and_only_then_imports_torch():
    script = textwrap.dedent("""
        import sys
        from hnclip import cpu_kernels
        done = cpu_kernels.configure_torch(sys.argv[1], environ={})
        loaded = "torch" in sys.modules
        import torch
        print(done, loaded, torch.backends.mkldnn.enabled)
    """)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    outputs = {setting: subprocess.run([sys.executable, "-c", script, setting], env=env, capture_output=True,
                                       text=True, check=True).stdout.split()
               for setting in ("native", "avx2", "portable")}
    assert outputs == {"native": ["False", "False", "True"], "avx2": ["False", "False", "True"],
                       "portable": ["True", "True", "False"]}


def test_python_m_hnclip_applies_the_workflows_portable_setting(tmp_path):
    """The workflow exports the setting; ``python -m hnclip`` sets the variables and switches oneDNN off
    before any verb runs (probed through a verb-less call that prints describe())."""
    probe = tmp_path / "probe.py"
    probe.write_text(textwrap.dedent("""
        import runpy, sys, json
        sys.argv = ["hnclip", "--help"]
        try:
            runpy.run_module("hnclip", run_name="__main__")
        except SystemExit:
            pass
        from hnclip import cpu_kernels
        print(json.dumps(cpu_kernels.describe()))
    """))
    env = {k: v for k, v in os.environ.items() if k not in PINNED and k != cpu_kernels.ENV_SETTING}
    env.update(PYTHONPATH=str(SRC), **{cpu_kernels.ENV_SETTING: "portable"})
    out = subprocess.run([sys.executable, str(probe)], env=env, capture_output=True, text=True, check=True)
    described = json.loads(out.stdout.strip().splitlines()[-1])
    assert described == {"setting": "portable", "capability": "DEFAULT", "ATEN_CPU_CAPABILITY": "default",
                         "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": None, "onednn": False,
                         "cpu": cpu_kernels.cpu_name()}


def test_a_cpu_without_avx2_is_not_pinned_and_says_so():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cpu_kernels.kernel_environment("avx2", has_avx2=False) == {}
    assert any("has no AVX2" in str(w.message) for w in caught)


def test_the_cpu_is_named_by_its_model_and_wide_instruction_sets(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9R14\nflags\t\t: fpu avx2 avx512f fma\n")
    assert cpu_kernels.cpu_name(info) == "AMD EPYC 9R14 (AVX512, AVX2)"
    info.write_text("processor\t: 0\nmodel name\t: Old Xeon\nflags\t\t: fpu avx avx512fx\n")
    assert cpu_kernels.cpu_name(info) == "Old Xeon (no AVX512, no AVX2)"


def test_avx2_is_read_from_the_cpu_flags(tmp_path, monkeypatch):
    monkeypatch.setattr(cpu_kernels.platform, "machine", lambda: "x86_64")
    with_avx2, without = tmp_path / "a", tmp_path / "b"
    with_avx2.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n")
    without.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx fma avx2x\n")  # avx2x is not avx2
    assert cpu_kernels.cpu_has_avx2(with_avx2) is True
    assert cpu_kernels.cpu_has_avx2(without) is False
    assert cpu_kernels.cpu_has_avx2(tmp_path / "missing") is False
    monkeypatch.setattr(cpu_kernels.platform, "machine", lambda: "arm64")
    assert cpu_kernels.cpu_has_avx2(with_avx2) is False


def test_apply_reads_the_workflow_variable_and_keeps_what_a_user_set(monkeypatch):
    monkeypatch.setattr(cpu_kernels, "cpu_has_avx2", lambda: True)
    environ = {cpu_kernels.ENV_SETTING: "avx2", "MKL_CBWR": "COMPATIBLE"}
    applied = cpu_kernels.apply(environ=environ)
    assert applied == {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert environ["MKL_CBWR"] == "COMPATIBLE"
    assert cpu_kernels.apply(environ={}) == {}
    assert cpu_kernels.apply("native", environ={}) == {}


@pytest.mark.slow  # trains in three shells, one per kernel setting (~25 s)
@pytest.mark.skipif(not cpu_kernels.cpu_has_avx2(), reason="the pin applies only on an x86-64 CPU with AVX2")
def test_the_pin_applied_in_process_equals_the_shells_and_moves_the_numbers(tmp_path):
    native_capability, native = _train(tmp_path, "-")
    capability, in_process = _train(tmp_path, "avx2")
    shell_capability, from_shell = _train(tmp_path, "-", PINNED)
    assert capability == shell_capability == "AVX2"
    assert in_process == from_shell  # every library saw the pin before its first kernel
    assert _train(tmp_path, "avx2") == (capability, in_process)  # and it is deterministic
    if native_capability != "AVX2":  # this CPU's own kernels are wider: they round differently
        assert native != in_process
