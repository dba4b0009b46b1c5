"""Research harness: pretrain a candidate backbone and measure the regime figures on the benchmark slice."""

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import data  # noqa: E402

from hnclip.frameworks.weight_decay import param_groups  # noqa: E402
from hnclip.models.dual_encoder import DualEncoder  # noqa: E402
from hnclip.models.factory import stretch_model  # noqa: E402

MEAN = torch.tensor([0.48145466, 0.4578275, 0.40821073]).view(1, 3, 1, 1)
STD = torch.tensor([0.26862954, 0.26130258, 0.27577711]).view(1, 3, 1, 1)


def pix(u8):
    x = torch.from_numpy(u8).permute(0, 3, 1, 2).float() / 255.0
    return (x - MEAN) / STD


def infonce(i, t, s):
    logits = s * i @ t.T
    y = torch.arange(len(i))
    return 0.5 * (F.cross_entropy(logits, y) + F.cross_entropy(logits.T, y))


def cosine_lr(step, total, warmup, lr):
    if step < warmup:
        return lr * (step + 1) / warmup
    return lr * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))


FLOOR = False


def cone_penalty(t, target):
    """relu(target - mean off-diagonal caption cosine of the batch); with FLOOR, the mean over pairs of
    relu(target - cosine)."""
    c = t @ t.T
    b = len(t)
    mean = (c.sum() - c.diagonal().sum()) / (b * (b - 1))
    if FLOOR:
        off = ~torch.eye(b, dtype=torch.bool)
        return torch.relu(target - c[off]).mean(), float(mean)
    return torch.relu(target - mean), float(mean)


def train(
    model,
    img,
    tok,
    steps,
    batch,
    lr,
    wd=0.1,
    warmup=50,
    seed=0,
    log_every=100,
    tag="",
    accum=1,
    fixed_scale=None,
    time_limit=None,
    cone_target=None,
    cone_weight=0.0,
):
    model.train()
    opt = torch.optim.AdamW(param_groups(model, wd), lr=lr, betas=(0.9, 0.98), eps=1e-6)
    g = torch.Generator().manual_seed(seed)
    n = len(img)
    perm = torch.randperm(n, generator=g)
    pos = 0
    t0 = time.time()
    micro = batch // accum
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = cosine_lr(step, steps, warmup, lr)
        opt.zero_grad(set_to_none=True)
        tot = 0.0
        for _ in range(accum):
            if pos + micro > n:
                perm, pos = torch.randperm(n, generator=g), 0
            idx = perm[pos : pos + micro].numpy()
            pos += micro
            out = model(pix(img[idx]), torch.from_numpy(tok[idx]).long())
            s = out["logit_scale"] if fixed_scale is None else fixed_scale
            loss = infonce(out["image_features"], out["text_features"], s)
            cone_mean = None
            if cone_weight:
                pen, cone_mean = cone_penalty(out["text_features"], cone_target)
                loss = loss + cone_weight * pen
            loss = loss / accum
            loss.backward()
            tot += float(loss.detach())
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            model.logit_scale.clamp_(max=math.log(100))
        if log_every and (step % log_every == 0 or step == steps - 1):
            print(
                f"{tag} step {step}/{steps} loss {tot:.4f} cone {cone_mean} s {float(model.scale()):.1f} "
                f"{time.time() - t0:.0f}s",
                flush=True,
            )
        if time_limit and time.time() - t0 > time_limit:
            print(f"{tag} time limit at step {step}", flush=True)
            break
    return model


@torch.no_grad()
def encode(model, img, tok, bs=256):
    model.eval()
    fi, ft = [], []
    for a in range(0, len(img), bs):
        out = model(pix(img[a : a + bs]), torch.from_numpy(tok[a : a + bs]).long())
        fi.append(out["image_features"])
        ft.append(out["text_features"])
    return torch.cat(fi), torch.cat(ft)


def r_at_1(fi, ft):
    sim = fi @ ft.T
    y = torch.arange(len(fi))
    return 100 * float((sim.argmax(1) == y).float().mean()), 100 * float((sim.argmax(0) == y).float().mean())


def batch_figures(fi, ft, s, n_batches=200, b=16, seed=0):
    g = np.random.default_rng(seed)
    means, hards, fr8, pair9, losses = [], [], [], [], []
    for _ in range(n_batches):
        idx = g.choice(len(ft), b, replace=False)
        t = ft[idx]
        c = (t @ t.T).numpy()
        off = c[~np.eye(b, dtype=bool)]
        means.append(off.mean())
        np.fill_diagonal(c, -2)
        hards.append(c.max(1).mean())
        fr8.append((off >= 0.8).mean())
        pair9.append((c >= 0.9).any())
        losses.append(float(infonce(fi[idx], t, s)))
    losses = np.asarray(losses)
    return dict(
        mean=float(np.mean(means)),
        hardest=float(np.mean(hards)),
        frac08=float(np.mean(fr8)),
        pair09=float(np.mean(pair9)),
        loss_median=float(np.median(losses)),
        sat=float((losses < 1e-3).mean()),
    )


def eff_dims(ft):
    x = ft.numpy().astype(np.float64)
    x = x - x.mean(0)
    ev = np.linalg.eigvalsh(np.cov(x.T))
    return float(ev.sum() ** 2 / (ev**2).sum())


def measure(model, bench, tag, shift=None):
    s = float(model.scale())
    fi, ft = encode(model, bench["val_img"], bench["val_tok"])
    val = r_at_1(fi, ft)
    ti, tt = encode(model, bench["test_img"], bench["test_tok"])
    test = r_at_1(ti, tt)
    tri, trt = encode(model, bench["train_img"], bench["train_tok"])
    geo = batch_figures(tri, trt, s)
    res = dict(tag=tag, scale=s, val=val, test=test, eff=eff_dims(trt), **geo)
    if shift is not None:
        si, st = encode(model, shift["test_img"], shift["test_tok"])
        res["shift"] = r_at_1(si, st)
    print("MEASURE", json.dumps(res), flush=True)
    return res


def finetune_probe(model, bench, lr=1e-3, epochs=3, micro=16, accum=2, seed=0, tag="ft"):
    """Plain FT as the pipeline's (InfoNCE over the micro-batch, accumulation, warmup 5 + cosine): epoch-1
    share of micro-batches with standard InfoNCE < 1e-3, val R@1 after each epoch."""
    import copy

    m = copy.deepcopy(model)
    m.train()
    opt = torch.optim.AdamW(param_groups(m, 0.1), lr=lr, betas=(0.9, 0.98), eps=1e-6)
    n = len(bench["train_img"])
    steps_per_epoch = n // (micro * accum)
    total = steps_per_epoch * epochs
    g = torch.Generator().manual_seed(seed)
    step = 0
    out_rows = []
    for ep in range(epochs):
        perm = torch.randperm(n, generator=g).numpy()
        losses = []
        for k in range(steps_per_epoch):
            for group in opt.param_groups:
                group["lr"] = cosine_lr(step, total, 5, lr)
            opt.zero_grad(set_to_none=True)
            for a in range(accum):
                idx = perm[(k * accum + a) * micro : (k * accum + a + 1) * micro]
                out = m(pix(bench["train_img"][idx]), torch.from_numpy(bench["train_tok"][idx]).long())
                loss = infonce(out["image_features"], out["text_features"], out["logit_scale"])
                losses.append(float(loss))
                (loss / accum).backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            with torch.no_grad():
                m.logit_scale.clamp_(max=math.log(100))
            step += 1
        fi, ft = encode(m, bench["val_img"], bench["val_tok"])
        losses = np.asarray(losses)
        row = dict(
            epoch=ep + 1,
            sat=float((losses < 1e-3).mean()),
            loss_median=float(np.median(losses)),
            val=r_at_1(fi, ft),
        )
        out_rows.append(row)
        m.train()
    print("FT", tag, lr, json.dumps(out_rows), flush=True)
    return out_rows


def config(width=64, layers=2, heads=2, vwidth=64, vlayers=2, image=32, patch=8, embed=64):
    return {
        "embed_dim": embed,
        "quick_gelu": False,
        "vision_cfg": {
            "image_size": image,
            "patch_size": patch,
            "width": vwidth,
            "layers": vlayers,
            "head_width": 32,
        },
        "text_cfg": {
            "context_length": 77,
            "vocab_size": 49408,
            "width": width,
            "heads": heads,
            "layers": layers,
        },
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tag", default="x")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--vwidth", type=int, default=64)
    p.add_argument("--vlayers", type=int, default=2)
    p.add_argument("--image", type=int, default=32)
    p.add_argument("--patch", type=int, default=8)
    p.add_argument("--embed", type=int, default=64)
    p.add_argument("--pool-mode", default="broad")
    p.add_argument("--pool-count", type=int, default=60000)
    p.add_argument("--slice-count", type=int, default=64)
    p.add_argument("--slice-inventory", type=int, default=7)
    p.add_argument("--slice-objects", default="4,7")
    p.add_argument("--slice-patterns", default="")
    p.add_argument("--mix-broad", type=float, default=0.0)
    p.add_argument("--short-steps", type=int, default=600)
    p.add_argument("--short-batch", type=int, default=64)
    p.add_argument("--short-lr", type=float, default=1e-3)
    p.add_argument("--long-steps", type=int, default=720)
    p.add_argument("--long-batch", type=int, default=512)
    p.add_argument("--long-accum", type=int, default=1)
    p.add_argument("--long-lr", type=float, default=1e-3)
    p.add_argument("--measure-every", type=int, default=0)
    p.add_argument("--ft-lrs", default="1e-3")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--bench-seed", type=int, default=2)
    p.add_argument("--bench-inventory", type=int, default=7)
    p.add_argument("--bench-objects", default="7,7")
    p.add_argument("--bench-cluster", type=int, default=1)
    p.add_argument("--save", default="")
    p.add_argument("--no-measure", action="store_true")
    p.add_argument("--cone-target", type=float, default=0.0)
    p.add_argument("--cone-weight", type=float, default=0.0)
    p.add_argument("--shift-share", type=float, default=0.0)
    p.add_argument("--floor", action="store_true")
    p.add_argument("--phrasing", default=None)
    p.add_argument("--load", default="")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    global FLOOR
    FLOOR = args.floor
    torch.manual_seed(0)
    objs = tuple(int(v) for v in args.bench_objects.split(","))
    bench = data.benchmark(
        seed=args.bench_seed,
        inventory=args.bench_inventory,
        objects=objs,
        cluster_size=args.bench_cluster,
        image_size=args.image,
    )
    shift = data.benchmark(
        family="synthetic_shift",
        seed=1,
        inventory=9,
        objects=(7, 7),
        n_train=0,
        n_val=0,
        image_size=args.image,
    )
    cfg = config(
        args.width, args.layers, args.heads, args.vwidth, args.vlayers, args.image, args.patch, args.embed
    )
    if args.load:
        model = torch.load(args.load, weights_only=False)
    else:
        pool = data.pool(
            count=args.pool_count,
            image_size=args.image,
            exclude=list(bench["signatures"]),
            mode=args.pool_mode,
            slice_count=args.slice_count,
            slice_inventory=args.slice_inventory,
            slice_objects=tuple(int(v) for v in args.slice_objects.split(",")),
            slice_patterns=[args.slice_patterns] if args.slice_patterns else None,
            mix_broad=args.mix_broad,
            shift_share=args.shift_share,
            phrasing=args.phrasing,
        )
        print("data ready", flush=True)
        model = DualEncoder(cfg, 77, 0, "rs")
        t0 = time.time()
        if args.short_steps:
            train(
                model,
                pool["img"],
                pool["short"],
                args.short_steps,
                args.short_batch,
                args.short_lr,
                tag=f"{args.tag}/short",
            )
        model = stretch_model(model, keep=20)
        with torch.no_grad():
            model.logit_scale.fill_(math.log(100))
        done = 0
        while done < args.long_steps:
            # one schedule over the whole stage; measure at chunk boundaries by training in pieces is not
            # the same schedule, so measure only at the end unless measure_every is set (then restarts)
            train(
                model,
                pool["img"],
                pool["tok"],
                args.long_steps,
                args.long_batch,
                args.long_lr,
                tag=f"{args.tag}/long",
                accum=args.long_accum,
                cone_target=args.cone_target,
                cone_weight=args.cone_weight,
            )
            done = args.long_steps
        print(f"{args.tag} pretrain {time.time() - t0:.0f}s", flush=True)
        if args.save:
            torch.save(model, args.save)
    if args.no_measure:
        return
    measure(model, bench, args.tag, shift)
    for lr in [float(v) for v in args.ft_lrs.split(",") if v]:
        finetune_probe(model, bench, lr=lr, tag=args.tag)


if __name__ == "__main__":
    main()
