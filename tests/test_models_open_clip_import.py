"""open_clip imported without its timm and transformers integrations (hnclip.models.open_clip_import).

Each check runs in a fresh interpreter, since what a process has imported is the thing under test: after
``import hnclip.models`` neither library is loaded yet both still import; after
``open_clip_with_integrations()`` open_clip's adapter classes, bound before the libraries were there, see them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("timm")
pytest.importorskip("transformers")


def _run(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # a fresh interpreter importing torch and open_clip (~10-25 s)
def test_hnclip_models_imports_open_clip_without_timm_or_transformers_and_leaves_them_importable():
    seen = _run("""
        import json, sys
        import hnclip.models
        import open_clip.hf_model, open_clip.timm_model
        loaded = {name: name in sys.modules for name in ("timm", "transformers")}
        adapters = {"hf": open_clip.hf_model.transformers is None, "timm": open_clip.timm_model.timm is None}
        import timm, transformers  # the absence marks are gone: both import as usual
        print(json.dumps({"loaded": loaded, "adapters_without": adapters,
                          "importable": [timm.__name__, transformers.__name__]}))
    """)
    assert seen["loaded"] == {"timm": False, "transformers": False}
    assert seen["adapters_without"] == {"hf": True, "timm": True}
    assert seen["importable"] == ["timm", "transformers"]


@pytest.mark.slow  # a fresh interpreter importing torch and open_clip (~10-25 s)
def test_open_clip_with_integrations_binds_the_libraries_for_classes_open_clip_already_holds():
    seen = _run("""
        import json
        import hnclip.models
        import open_clip.model
        timm_model_class, hf_encoder_class = open_clip.model.TimmModel, open_clip.model.HFTextEncoder
        from hnclip.models.open_clip_import import open_clip_with_integrations
        open_clip_with_integrations()
        import open_clip.coca_model, timm, transformers
        print(json.dumps({
            "timm": timm_model_class.__init__.__globals__["timm"] is timm,
            "transformers": hf_encoder_class.__init__.__globals__["transformers"] is transformers,
            "coca": open_clip.coca_model._has_transformers,
            "timm_tower": type(open_clip.timm_model.TimmModel("resnet18", embed_dim=8, pretrained=False)).__name__,
        }))
    """)
    normal = _run("""
        import json
        import open_clip.coca_model
        print(json.dumps(open_clip.coca_model._has_transformers))
    """)  # False where transformers lacks a generation class CoCa imports
    assert seen == {"timm": True, "transformers": True, "coca": normal, "timm_tower": "TimmModel"}


@pytest.mark.slow  # a fresh interpreter importing torch and open_clip (~10-25 s)
def test_a_normally_imported_open_clip_is_left_as_it_is():
    seen = _run("""
        import json
        import open_clip, open_clip.hf_model
        before = open_clip.hf_model.transformers
        from hnclip.models.open_clip_import import import_open_clip, open_clip_with_integrations
        same = import_open_clip() is open_clip and open_clip_with_integrations() is open_clip
        print(json.dumps({"same": same, "hf_kept": open_clip.hf_model.transformers is before,
                          "had_transformers": before is not None}))
    """)
    assert seen == {"same": True, "hf_kept": True, "had_transformers": True}


@pytest.mark.slow  # a fresh interpreter importing torch and open_clip (~10-25 s)
def test_hnclip_models_leaves_torchs_compiler_unimported_and_importable():
    seen = _run("""
        import json, sys
        import hnclip.models
        import open_clip
        loaded = "torch._dynamo" in sys.modules
        roi_align = sys.modules["torchvision.ops.roi_align"]
        import torch, torch._dynamo.utils
        print(json.dumps({
            "loaded": loaded,
            "stand_in_answers": [roi_align.is_compile_supported(d) for d in ("cpu", "meta")],
            "real_answers": [torch._dynamo.utils.is_compile_supported(d) for d in ("cpu", "meta")],
            "real_module": hasattr(torch._dynamo, "optimize") and torch._dynamo is sys.modules["torch._dynamo"],
            "open_clip_builds": type(open_clip.create_model("RN50", pretrained=None)).__name__,
        }))
    """)
    assert seen["loaded"] is False  # nothing in the import needed the compiler
    assert seen["stand_in_answers"] == seen["real_answers"]  # roi_align's helper is the real one when called
    assert seen["real_module"] is True and seen["open_clip_builds"] == "CLIP"
