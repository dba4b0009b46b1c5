"""The run's summary (results/summary.md, .json) and the side-by-side comparison of machines."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

from hnclip.analysis.summary import build_summary, compare_summaries, render_summary_markdown


def _condition(key, met, value=1.0, **values):
    return {"key": key, "label": key.replace("_", " "), "met": met, "ours": f"{key} ours", "target": f"{key} target",
            "value": value, "values": values, "intervals": {}}


def _regime(difference=3.0, bounds=(1.0, 5.0), saturation=True, competitor=None):
    power = _condition("power", True, 1.5, difference=difference, seeds=3, half_width=(bounds[1] - bounds[0]) / 2)
    power["intervals"] = {"difference": list(bounds)}
    comparisons = {"baseline": {"method": "hnclip", "against": "longclip", "against_label": "Long-CLIP FT",
                                "difference": difference, "interval": list(bounds), "seeds": 3}}
    if competitor:
        comparisons["competitor"] = {"method": "hnclip", "against": competitor[0], "against_label": competitor[1],
                                     "difference": 1.25, "interval": [0.25, 2.25], "seeds": 3}
    return {"benchmark": "synthetic", "met": 2 if saturation else 1,
            "conditions": [_condition("strong_init", True), _condition("saturation", saturation), power],
            "comparisons": comparisons}


CLAIMS = {"claims": [{"id": "a1_columns", "verdict": "holds"}, {"id": "speed.goal", "verdict": "no data"},
                     {"id": "premise_error", "verdict": "inconclusive"}]}
MACHINE = {"cpu": "AMD EPYC (no AVX512, AVX2)", "cpu_kernels": "avx2", "torch": "2.14.1", "git_commit": "c0ffee",
           "date": "2026-12-06"}


def _summary(**kwargs):
    return build_summary([_regime(**kwargs)], CLAIMS, {"weights_sha256": "ab" * 32, "release": "toy"}, MACHINE, "toy")


def test_the_summary_holds_conditions_main_comparison_and_verdicts():
    s = _summary()
    assert s["regime"]["synthetic"]["conditions"]["saturation"]["met"] is True
    assert s["main"]["synthetic"] == {"difference": 3.0, "interval": [1.0, 5.0], "seeds": 3, "half_width": 2.0,
                                      "against": "longclip", "against_label": "Long-CLIP FT"}
    assert s["claims"]["tally"] == {"holds": 1, "does not hold": 0, "inconclusive": 1, "no data": 1,
                                    "against a collapsed row": 0}
    md = render_summary_markdown(s)
    assert "+3.00 [+1.00, +5.00] (3 seeds)" in md and "AMD EPYC" in md and "2 of 3" in md
    # without a competitor the one row is Long-CLIP FT's, and the paper's figure is not set beside it
    row = next(line for line in md.splitlines() if "HN-CLIP − Long-CLIP FT" in line)
    assert "+2.4 to +4.3" not in row


def test_the_headline_is_the_strongest_competitor_with_long_clip_ft_as_a_second_row():
    s = _summary(competitor=("finelip", "FineLIP"))
    assert s["main"]["synthetic"]["against"] == "finelip" and s["main"]["synthetic"]["half_width"] == 1.0
    assert s["baseline"]["synthetic"]["against"] == "longclip"
    lines = render_summary_markdown(s).splitlines()
    head = next(i for i, line in enumerate(lines) if "HN-CLIP − FineLIP (the strongest competitor" in line)
    assert "+1.25 [+0.25, +2.25] (3 seeds)" in lines[head] and "+2.4 to +4.3 over the strongest" in lines[head]
    assert "HN-CLIP − Long-CLIP FT (plain fine-tuning)" in lines[head + 1]
    assert "+3.00 [+1.00, +5.00]" in lines[head + 1] and "+2.4" not in lines[head + 1]
    # two machines that name different competitors compare different pairs: flagged
    text, n = compare_summaries([("a", s), ("b", _summary(competitor=("lora", "LoRA")))])
    assert n == 1 and any("FineLIP / LoRA" in line and "differs" in line for line in text.splitlines())


def test_each_condition_shows_its_three_way_decision():
    regime = _regime()
    headroom = _condition("headroom", None, 4.6)
    headroom.update(decision="undecided", intervals={"t2i": [2.8, 6.4]})
    regime["conditions"].insert(1, headroom)
    s = build_summary([regime], CLAIMS, {"weights_sha256": "ab" * 32}, MACHINE, "toy")
    conditions = s["regime"]["synthetic"]["conditions"]
    assert conditions["headroom"]["decision"] == "undecided" and conditions["headroom"]["intervals"] == {"t2i": [2.8, 6.4]}
    assert conditions["strong_init"]["decision"] == "met"  # a file without decisions: its bool
    assert s["regime"]["synthetic"]["undecided"] == 1
    md = render_summary_markdown(s)
    assert "| synthetic: headroom (undecided) | headroom ours |" in md and "2 of 4, 1 undecided" in md
    other = copy.deepcopy(s)
    other["regime"]["synthetic"]["conditions"]["headroom"]["decision"] = "not met"
    text, n = compare_summaries([("a", s), ("b", other)])
    assert n == 1 and any("headroom" in line and "differs" in line for line in text.splitlines())


def test_two_machines_agreeing_within_their_intervals_show_no_disagreement():
    text, n = compare_summaries([("a", _summary()), ("b", _summary(difference=3.5, bounds=(1.4, 5.6)))])
    assert n == 0 and "0 disagreement" in text


def test_a_verdict_or_a_number_outside_the_other_interval_is_flagged():
    other = _summary(difference=6.0, bounds=(5.5, 6.5), saturation=False)
    other["machine"]["cpu"] = "Intel Xeon"
    other["claims"]["verdicts"]["a1_columns"] = "inconclusive"
    text, n = compare_summaries([("a", _summary()), ("b", other)])
    flagged = [line.split()[0] for line in text.splitlines() if line.endswith("<- differs")]
    assert n == 3 and "a1_columns" in flagged and "synthetic:" in flagged
    assert any("saturation" in line and "differs" in line for line in text.splitlines())


def test_the_compare_verb_exits_1_on_a_disagreement(tmp_path):
    a, b = _summary(), copy.deepcopy(_summary())
    b["backbone"]["weights_sha256"] = "cd" * 32
    for name, s in (("a", a), ("b", b)):
        (tmp_path / f"{name}.json").write_text(json.dumps(s))
    proc = subprocess.run([sys.executable, "-m", "hnclip", "summary", "--compare", str(tmp_path / "a.json"),
                           str(tmp_path / "b.json")], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")})
    assert proc.returncode == 1 and "backbone weights" in proc.stdout


def _broken_files(folder: Path, good: dict) -> dict[str, tuple[Path, str]]:
    """name -> (a file no summary.json, the words its error must say)."""
    text = json.dumps(good)
    files = {"truncated": (text[:len(text) // 2].encode(), "not valid JSON"),
             "foreign": (json.dumps({"name": "another tool", "results": [1, 2]}).encode(), "missing key(s) machine"),
             "list": (json.dumps([good]).encode(), "a JSON list, not a summary"),
             "binary": (bytes(range(256)) * 4, "not a text file"),
             "claims_list": (json.dumps({**good, "claims": []}).encode(), "claims is a list")}
    out = {}
    for name, (content, words) in files.items():
        (folder / f"{name}.json").write_bytes(content)
        out[name] = (folder / f"{name}.json", words)
    return out


def test_compare_refuses_a_file_that_is_not_a_summary_naming_it_in_one_line(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_summary()))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    for name, (path, words) in _broken_files(tmp_path, _summary()).items():
        proc = subprocess.run([sys.executable, "-m", "hnclip", "summary", "--compare", str(good), str(path)],
                              capture_output=True, text=True, env=env)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, (name, proc.stderr)
        assert len(lines) == 1 and "Traceback" not in proc.stderr, (name, proc.stderr)
        assert lines[0].startswith(f"hnclip summary --compare: {path}: ") and words in lines[0], (name, lines[0])
        assert proc.stdout == ""
    truncated = subprocess.run([sys.executable, "-m", "hnclip", "summary", "--compare", str(good),
                                str(tmp_path / "truncated.json")], capture_output=True, text=True, env=env)
    assert "truncated" in truncated.stderr
