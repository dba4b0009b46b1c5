"""The rehearsal's released checkpoints (config/rehearsal-released.yaml): `hnclip rehearsal-files` writes each
`models:` entry inside the rehearsal's folder in its publisher's format, never a file outside it, and every stand-in
converts (the formats themselves are checked against the publishers' code in tests/test_models_publishers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hnclip.models import load_model
from hnclip.models.convert import convert_source
from hnclip.rehearsal.released import write_released_stand_ins

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # every released format written and converted (~15 s)
def test_the_stand_ins_of_rehearsal_released_yaml_are_written_and_convert(tmp_path):
    models = yaml.safe_load((REPO / "config/rehearsal-released.yaml").read_text())["models"]
    released = yaml.safe_load((REPO / "config/released.yaml").read_text())["models"]
    folder = tmp_path / "resources/rehearsal"
    entries = {}
    for name, entry in models.items():  # the layered config: released.yaml's entries, the rehearsal's paths over them
        entry = {**released.get(name, {}), **entry}
        for key in ("checkpoint", "base"):
            if entry.get(key):
                entry[key] = str(tmp_path / entry[key])
        entries[name] = entry
    entries["elsewhere"] = {"source": "longclip", "checkpoint": str(tmp_path / "real/longclip-B.pt")}
    written = write_released_stand_ins(entries, folder, seed=0, layers={"vision": 1, "text": 1})
    # the base CLIPModel folder is shared: written once, by the first entry that names it
    assert set(written) == set(models) - {"openai_b16"} and not (tmp_path / "real").exists()
    assert write_released_stand_ins(entries, folder, seed=0, layers={"vision": 1, "text": 1}) == {}  # kept
    for name, entry in entries.items():
        if name == "elsewhere":
            continue
        out = convert_source(entry["source"], entry["checkpoint"], tmp_path / "converted" / name,
                             base=entry.get("base"), stretch=20 if entry.get("stretch") else None, key=f"models.{name}")
        model = load_model(out)
        assert model.context_length == 248, name
        assert (out / "framework.json").is_file() == (entry["source"] == "finelip"), name
