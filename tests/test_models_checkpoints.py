"""Long-CLIP / OpenAI checkpoints: a small file in Long-CLIP's own format, checked against a float64
re-implementation of Long-CLIP's encode_text, loaded from disk and from a pre-populated HF cache."""

import hashlib
import shutil
from pathlib import Path

import open_clip
import pytest
import torch
import torch.nn.functional as F

from hnclip.models import create_model, load_longclip_checkpoint, load_openai_checkpoint

TEXT_WIDTH, TEXT_LAYERS, VOCAB, CONTEXT = 128, 2, 1000, 248  # OpenAI rule: heads = width // 64 = 2
VISION_WIDTH, PATCH, GRID, EMBED = 64, 16, 2, 32


def _block(prefix, width, generator):
    def rand(*shape, scale=0.1):
        return torch.randn(*shape, generator=generator) * scale

    return {
        f"{prefix}.ln_1.weight": 1 + rand(width), f"{prefix}.ln_1.bias": rand(width),
        f"{prefix}.attn.in_proj_weight": rand(3 * width, width),
        f"{prefix}.attn.in_proj_bias": rand(3 * width),
        f"{prefix}.attn.out_proj.weight": rand(width, width), f"{prefix}.attn.out_proj.bias": rand(width),
        f"{prefix}.ln_2.weight": 1 + rand(width), f"{prefix}.ln_2.bias": rand(width),
        f"{prefix}.mlp.c_fc.weight": rand(4 * width, width), f"{prefix}.mlp.c_fc.bias": rand(4 * width),
        f"{prefix}.mlp.c_proj.weight": rand(width, 4 * width), f"{prefix}.mlp.c_proj.bias": rand(width),
    }


def _longclip_state_dict(seed=0):
    """Random weights under Long-CLIP's key names: OpenAI CLIP keys plus ``positional_embedding_res``."""
    g = torch.Generator().manual_seed(seed)
    state = {
        "visual.class_embedding": torch.randn(VISION_WIDTH, generator=g) * 0.1,
        "visual.positional_embedding": torch.randn(GRID * GRID + 1, VISION_WIDTH, generator=g) * 0.1,
        "visual.conv1.weight": torch.randn(VISION_WIDTH, 3, PATCH, PATCH, generator=g) * 0.05,
        "visual.ln_pre.weight": torch.ones(VISION_WIDTH), "visual.ln_pre.bias": torch.zeros(VISION_WIDTH),
        "visual.ln_post.weight": torch.ones(VISION_WIDTH), "visual.ln_post.bias": torch.zeros(VISION_WIDTH),
        "visual.proj": torch.randn(VISION_WIDTH, EMBED, generator=g) * 0.1,
        "token_embedding.weight": torch.randn(VOCAB, TEXT_WIDTH, generator=g) * 0.1,
        # different values in the two tables, so using the wrong one for any row shows
        "positional_embedding": torch.randn(CONTEXT, TEXT_WIDTH, generator=g) * 0.1,
        "positional_embedding_res": torch.randn(CONTEXT, TEXT_WIDTH, generator=g) * 0.1 + 0.5,
        "ln_final.weight": 1 + torch.randn(TEXT_WIDTH, generator=g) * 0.1,
        "ln_final.bias": torch.randn(TEXT_WIDTH, generator=g) * 0.1,
        "text_projection": torch.randn(TEXT_WIDTH, EMBED, generator=g) * 0.1,
        "logit_scale": torch.tensor(4.2),
        "input_resolution": torch.tensor(PATCH * GRID), "context_length": torch.tensor(CONTEXT),
        "vocab_size": torch.tensor(VOCAB),
    }
    state.update(_block("visual.transformer.resblocks.0", VISION_WIDTH, g))
    for layer in range(TEXT_LAYERS):
        state.update(_block(f"transformer.resblocks.{layer}", TEXT_WIDTH, g))
    return state


def _tokens():
    """Captions ending before, across and at the end of the 20 frozen positions; EOT = largest id."""
    g = torch.Generator().manual_seed(5)
    tokens = torch.zeros(3, CONTEXT, dtype=torch.long)
    for row, length in enumerate((10, 60, CONTEXT)):
        tokens[row, :length] = torch.randint(1, VOCAB - 1, (length,), generator=g)
        tokens[row, length - 1] = VOCAB - 1
    return tokens


def _longclip_encode_text_float64(state, tokens):
    """Long-CLIP's encode_text (model/model_longclip.py) in functional float64 ops."""
    sd = {k: v.to(torch.float64) for k, v in state.items()}
    width, heads, length = TEXT_WIDTH, TEXT_WIDTH // 64, tokens.shape[1]
    mask1 = torch.zeros(length, 1, dtype=torch.float64)
    mask1[:20] = 1
    mask2 = 1 - mask1
    x = sd["token_embedding.weight"][tokens]
    x = x + sd["positional_embedding"] * mask1 + sd["positional_embedding_res"] * mask2
    causal = torch.full((length, length), float("-inf"), dtype=torch.float64).triu(1)
    head_dim = width // heads
    for layer in range(TEXT_LAYERS):
        p = f"transformer.resblocks.{layer}."
        h = F.layer_norm(x, (width,), sd[p + "ln_1.weight"], sd[p + "ln_1.bias"], eps=1e-5)
        q, k, v = (h @ sd[p + "attn.in_proj_weight"].T + sd[p + "attn.in_proj_bias"]).split(width, dim=-1)
        outs = []
        for head in range(heads):
            cols = slice(head * head_dim, (head + 1) * head_dim)
            scores = q[..., cols] @ k[..., cols].transpose(1, 2) / head_dim ** 0.5 + causal
            outs.append(scores.softmax(dim=-1) @ v[..., cols])
        x = x + torch.cat(outs, dim=-1) @ sd[p + "attn.out_proj.weight"].T + sd[p + "attn.out_proj.bias"]
        h = F.layer_norm(x, (width,), sd[p + "ln_2.weight"], sd[p + "ln_2.bias"], eps=1e-5)
        h = h @ sd[p + "mlp.c_fc.weight"].T + sd[p + "mlp.c_fc.bias"]
        h = h * torch.sigmoid(1.702 * h)  # QuickGELU
        x = x + h @ sd[p + "mlp.c_proj.weight"].T + sd[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (width,), sd["ln_final.weight"], sd["ln_final.bias"], eps=1e-5)
    pooled = x[torch.arange(tokens.shape[0]), tokens.argmax(dim=-1)] @ sd["text_projection"]
    return F.normalize(pooled, dim=-1)


@pytest.fixture(scope="module")
def longclip_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "longclip-test.pt"
    torch.save(_longclip_state_dict(), path)
    return path


def test_longclip_checkpoint_encode_text_matches_float64_longclip_reference(longclip_file):
    model = load_longclip_checkpoint(longclip_file).eval()
    assert model.context_length == CONTEXT and model.frozen_positions == 20 and model.embed_dim == EMBED
    assert model.logit_scale.item() == pytest.approx(4.2)
    tokens = _tokens()
    expected = _longclip_encode_text_float64(_longclip_state_dict(), tokens).to(torch.float32)
    torch.testing.assert_close(model.encode_text(tokens), expected, rtol=0, atol=2e-6)


def test_longclip_tables_split_into_frozen_and_trainable_rows(longclip_file):
    state = _longclip_state_dict()
    model = load_longclip_checkpoint(longclip_file)
    assert torch.equal(model.positional_embedding_frozen, state["positional_embedding"][:20])
    assert torch.equal(model.positional_embedding_trainable.detach(), state["positional_embedding_res"][20:])
    assert model.positional_embedding_trainable.requires_grad


def test_architecture_and_image_path_agree_with_open_clip_builder(tmp_path):
    # float16 weights: open_clip's builder rounds through float16, so both must then agree exactly
    state = {k: v.half() if v.is_floating_point() else v for k, v in _longclip_state_dict().items()}
    torch.save(state, tmp_path / "half.pt")
    model = load_longclip_checkpoint(tmp_path / "half.pt").eval()
    assert model.clip.visual.proj.dtype == torch.float32
    openai_state = {k: v for k, v in state.items() if k != "positional_embedding_res"}
    reference = open_clip.model.build_model_from_openai_state_dict(dict(openai_state), cast_dtype=None)
    reference = reference.float()
    ours = {k.removeprefix("clip."): tuple(v.shape) for k, v in model.clip.state_dict().items()}
    theirs = {k: tuple(v.shape) for k, v in reference.state_dict().items()
              if k not in ("positional_embedding", "logit_scale")}
    assert ours == theirs
    images = torch.randn(2, 3, PATCH * GRID, PATCH * GRID)
    torch.testing.assert_close(model.encode_image(images), reference.encode_image(images, normalize=True),
                               rtol=0, atol=1e-6)


def test_longclip_checkpoint_resolves_through_offline_hf_cache(longclip_file, tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    repo = cache / "models--someone--LongCLIP-test"
    revision = "0123456789abcdef0123456789abcdef01234567"
    blob = hashlib.sha256(longclip_file.read_bytes()).hexdigest()
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "snapshots" / revision).mkdir(parents=True)
    shutil.copyfile(longclip_file, repo / "blobs" / blob)
    (repo / "snapshots" / revision / "longclip-test.pt").symlink_to(f"../../blobs/{blob}")
    (repo / "refs" / "main").write_text(revision)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)

    from_hub = load_longclip_checkpoint("hf://someone/LongCLIP-test/longclip-test.pt").eval()
    from_disk = load_longclip_checkpoint(longclip_file).eval()
    tokens = _tokens()
    assert torch.equal(from_hub.encode_text(tokens), from_disk.encode_text(tokens))

    with pytest.raises(FileNotFoundError, match="hf://someone/LongCLIP-test/missing.pt"):
        load_longclip_checkpoint("hf://someone/LongCLIP-test/missing.pt")


def test_openai_checkpoint_loads_77_positions_unfrozen_and_refuses_longclip_files(tmp_path, longclip_file):
    state = _longclip_state_dict()
    state.pop("positional_embedding_res")
    state["positional_embedding"] = state["positional_embedding"][:77].clone()
    torch.save(state, tmp_path / "openai.pt")
    model = load_openai_checkpoint(tmp_path / "openai.pt")
    assert model.context_length == 77 and model.frozen_positions == 0
    assert torch.equal(model.positional_embedding().detach(), state["positional_embedding"])
    with pytest.raises(ValueError, match="Long-CLIP checkpoint"):
        load_openai_checkpoint(longclip_file)


def test_bad_checkpoints_name_the_file_and_key(tmp_path):
    state = _longclip_state_dict()
    state.pop("positional_embedding_res")
    torch.save(state, tmp_path / "no_res.pt")
    with pytest.raises(ValueError, match=r"no_res\.pt.*positional_embedding_res"):
        load_longclip_checkpoint(tmp_path / "no_res.pt")
    with pytest.raises(FileNotFoundError, match="absent.pt"):
        load_longclip_checkpoint(tmp_path / "absent.pt")
    torch.save(create_model("micro"), tmp_path / "pickled_module.pt")  # a whole module needs unpickling
    with pytest.raises(ValueError, match="weights-only"):
        load_openai_checkpoint(tmp_path / "pickled_module.pt")


class _RunsCode:
    """Unpickling this would call ``Path.touch`` on the marker file: what a malicious checkpoint does."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


@pytest.mark.parametrize("reader", ["state_dict", "goal"])
def test_a_pickle_that_needs_code_is_refused_naming_the_file_without_torchs_advice(tmp_path, reader):
    from hnclip.models.publishers import read_publisher_state

    marker, path = tmp_path / "code-ran", tmp_path / "evil.pth"
    torch.save({"weight": torch.zeros(2), "payload": _RunsCode(marker)}, path)
    read = (lambda: load_openai_checkpoint(path)) if reader == "state_dict" else (
        lambda: read_publisher_state(path, "goal"))
    with pytest.raises(ValueError) as error:
        read()
    text = str(error.value)
    assert text.startswith(f"{path}: refused: not a weights-only") and "\n" not in text
    assert "weights_only=False" not in text and "documentation of torch.load" not in text
    assert error.value.__suppress_context__  # torch's message does not follow in the traceback
    assert not marker.exists()  # nothing ran
    with pytest.raises(FileNotFoundError, match="absent.pth: no such"):
        read_publisher_state(tmp_path / "absent.pth", "goal")
