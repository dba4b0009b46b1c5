"""The regime conditions (hnclip.analysis.regime): each on hand-built arrays whose answers are worked out
here by hand or by a plain loop, the rebuilt micro-batches against the ones the trainer really trains,
the per-micro-batch InfoNCE column, and ``hnclip regime`` end to end on a micro model."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from test_train_support import make_dataset, read_csv_rows, run_training, small_config

from hnclip.analysis import regime as R
from hnclip.analysis.bootstrap import BootstrapSettings
from hnclip.dynamics_log import DYNAMICS_COLUMNS, format_micro_batch_losses, parse_micro_batch_losses


def unit(*degrees) -> np.ndarray:
    """Unit vectors in the plane at the given angles: the cosine of two is cos(angle difference)."""
    a = np.radians(degrees)
    return np.stack([np.cos(a), np.sin(a)], axis=1)


# 0/20 degrees: cos 0.940; 90/100: cos 0.985; 180 and 270 are far from everything (cos <= 0.17)
ANGLES = (0.0, 20.0, 90.0, 100.0, 180.0, 270.0)
FEATURES = unit(*ANGLES)
# one standard deviation above a caption's mean cosine, and at least 0.8: every caption's mean cosine to the
# other five is at most 0.07 and its spread at most 0.64, so the floor decides: 0 <-> 1 and 2 <-> 3
NEAR = R.NearDuplicates.of(FEATURES, z=1.0, floor=0.8)


def brute_partners(features: np.ndarray, z: float, floor: float) -> list[set]:
    """The relation by a plain loop: i and j are near-duplicates when cos(i, j) >= max(mean_i + z sd_i, floor)
    or >= max(mean_j + z sd_j, floor), mean and (population) sd over each caption's cosines to the others."""
    n = len(features)
    cos = [[float(features[i] @ features[j]) for j in range(n)] for i in range(n)]
    threshold = []
    for i in range(n):
        others = [cos[i][j] for j in range(n) if j != i]
        mean = sum(others) / len(others)
        sd = math.sqrt(sum((c - mean) ** 2 for c in others) / len(others))
        threshold.append(max(mean + z * sd, floor))
    partners = [set() for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i != j and (cos[i][j] >= threshold[i] or cos[i][j] >= threshold[j]):
                partners[i].add(j)
    return partners


# ------------------------------------------------------------------------------ near-duplicates
def test_near_duplicate_relation_by_hand():
    assert [sorted(p) for p in NEAR.partners] == [[1], [0], [3], [2], [], []]
    # z = 0 and a floor of 0.3: every threshold is the floor (means <= 0.07); 1 and 2 are 70 degrees apart
    # (0.342) and join, 1 and 3 (80 degrees, 0.174) and 0 and 2 (90 degrees, 0) do not
    wider = R.NearDuplicates.of(FEATURES, z=0.0, floor=0.3, chunk=4)
    assert [sorted(p) for p in wider.partners] == [[1], [0, 2], [1, 3], [2], [], []]
    assert NEAR.pair_count([0, 1, 2, 3]) == 2 and NEAR.pair_count([0, 2, 4]) == 0
    assert NEAR.companions([0, 1, 2]).tolist() == [True, True, False]
    assert NEAR.companions([3, 4, 5]).tolist() == [False, False, False]
    assert NEAR.has_pair([2, 3]) and not NEAR.has_pair([1, 4, 5])
    # 2 pairs of 15; 4 of 6 captions have one partner
    assert NEAR.base_rate() == {"pairs": 2, "pair_share": pytest.approx(2 / 15), "partners_mean": pytest.approx(4 / 6),
                                "with_partner": pytest.approx(4 / 6)}
    batches = [R.MicroBatch(1, 1, 0, np.array([0, 1, 2])), R.MicroBatch(1, 1, 1, np.array([3, 4, 5])),
               R.MicroBatch(2, 2, 0, np.array([0, 2, 3])), R.MicroBatch(2, 2, 1, np.array([1, 4, 5]))]
    assert R.batch_pair_counts(NEAR, batches) == {1: (1, 2), 2: (1, 2)}
    # random batches of 3 of the 6: 4 of the 20 triples hold {0, 1}, 4 others {2, 3}: 8 / 20
    assert NEAR.chance_batch_share(3) == pytest.approx(0.4, abs=0.03)
    assert NEAR.chance_batch_share(2) == pytest.approx(2 / 15, abs=0.02)
    # a split far apart has none at all, however low the relative threshold
    apart = R.NearDuplicates.of(unit(0.0, 90.0, 180.0, 270.0), z=-1.0)
    assert apart.base_rate()["pairs"] == 0 and apart.chance_batch_share(2) == 0.0
    # A.2's extreme pair (cos >= 0.9), a geometry figure kept for the backbone's release
    assert R.micro_batch_has_extreme_pair(FEATURES, [0, 1]) and not R.micro_batch_has_extreme_pair(FEATURES, [1, 2])
    assert R.EXTREME_COSINE == 0.9 and R.NEAR_DUPLICATE_Z == 1.5 and R.GEOMETRY_COSINE == 0.8


def test_the_relative_threshold_binds_where_a_floor_cannot():
    """z decides, not the floor: without a floor, z = 1.5 keeps 0 <-> 1 (0.940 against caption 0's mean
    -0.047 + 1.5 x 0.617 = 0.878) and drops 2 <-> 3 although they are closer (0.985 against caption 3's
    0.035 + 1.5 x 0.636 = 0.989 and caption 2's 0.065 + 1.5 x 0.643 = 1.03)."""
    assert [sorted(p) for p in R.NearDuplicates.of(FEATURES, z=1.5, floor=0.0).partners] == [[1], [0], [], [], [], []]
    assert [sorted(p) for p in R.NearDuplicates.of(FEATURES, z=2.0, floor=0.0).partners] == [[]] * 6
    # a crowded split like the toy's (every caption's 5th-nearest above 0.95): a floor anywhere in 0.8-0.95
    # admits every pair, so it never binds; the relative threshold does, and a higher z admits fewer pairs
    rng = np.random.default_rng(5)
    centre = np.eye(16)[0]
    crowded = centre + 0.12 * rng.normal(size=(120, 16)) / 4
    crowded /= np.linalg.norm(crowded, axis=1, keepdims=True)
    cos = crowded @ crowded.T
    np.fill_diagonal(cos, np.inf)
    assert np.sort(cos, axis=1)[:, -6].min() >= 0.95 and cos.min() >= 0.95
    for floor in (0.8, 0.9, 0.95):
        assert R.NearDuplicates.of(crowded, z=-10.0, floor=floor).base_rate()["pair_share"] == 1.0
    pairs = []
    for z in (1.0, 1.5, 2.0):
        near = R.NearDuplicates.of(crowded, z=z, chunk=50)
        assert [set(p) for p in near.partners] == brute_partners(crowded, z, R.GEOMETRY_COSINE)
        pairs.append(near.base_rate()["pairs"])
    assert pairs[0] > pairs[1] > pairs[2] > 0


def test_the_relation_means_the_same_at_any_split_size():
    """A caption's mean and spread are estimates: the share of pairs that are near-duplicates is about the
    same on 300 captions and on 1,200 of the same distribution (a count of nearest neighbours would be four
    times the share on the smaller split)."""
    rng = np.random.default_rng(11)
    features = np.eye(32)[0] + 0.05 * rng.normal(size=(1200, 32))
    features /= np.linalg.norm(features, axis=1, keepdims=True)
    small, large = (R.NearDuplicates.of(features[:n]).base_rate()["pair_share"] for n in (300, 1200))
    assert large > 0.01 and small == pytest.approx(large, rel=0.2)


def test_hardest_partner_is_the_most_similar_other_row():
    partner, cosine = R.hardest_partner(FEATURES[:4], chunk=3)
    assert partner.tolist() == [1, 0, 3, 2]
    assert cosine == pytest.approx([math.cos(math.radians(20))] * 2 + [math.cos(math.radians(10))] * 2)


# ------------------------------------------------------------------------------------ retrieval
def test_rank_and_top1_match_a_loop_and_the_evaluation_ranks():
    from hnclip.evaluate import recall_at_k

    rng = np.random.default_rng(4)
    text_image = np.array([0, 0, 1, 2, 2, 2, 3, 4])  # several captions for some images
    images = rng.normal(size=(5, 3))
    texts = rng.normal(size=(8, 3))
    images /= np.linalg.norm(images, axis=1, keepdims=True)
    texts /= np.linalg.norm(texts, axis=1, keepdims=True)
    got = R.rank_and_top1(images, texts, text_image, chunk=2)
    for i in range(5):
        scores = [float(images[i] @ texts[t]) for t in range(8)]
        best_own = max(s for t, s in enumerate(scores) if text_image[t] == i)
        assert got["i2t_rank"][i] == sum(s > best_own for s in scores)
        assert got["i2t_top1"][i] == int(np.argmax(scores))
    for t in range(8):
        scores = [float(texts[t] @ images[i]) for i in range(5)]
        assert got["t2i_rank"][t] == sum(s > scores[text_image[t]] for s in scores)
        assert got["t2i_top1"][t] == int(np.argmax(scores))
    ranks = recall_at_k(torch.tensor(images), torch.tensor(texts), text_image_ids=torch.tensor(text_image),
                        return_ranks=True)["ranks"]
    assert got["i2t_rank"].tolist() == ranks["i2t"] and got["t2i_rank"].tolist() == ranks["t2i"]


def test_errors_with_a_near_duplicate_top1_by_hand():
    # captions at 0, 20, 90 degrees (0 and 20 are near-duplicates; 90's nearest is 70 degrees away, cos 0.34);
    # images at 15, 20, 50 degrees
    captions = unit(0.0, 20.0, 90.0)
    near = R.NearDuplicates.of(captions, z=0.5, floor=0.8)
    assert [sorted(p) for p in near.partners] == [[1], [0], []]
    images = unit(15.0, 20.0, 50.0)
    text_image = np.arange(3)
    got = R.rank_and_top1(images, captions, text_image)
    # image 0 retrieves caption 1 (5 degrees away, its own is 15): an error, and caption 1 is its twin;
    # image 2 retrieves caption 1 (30 degrees; its own is 40 away): an error, caption 1 is no twin of caption 2.
    # A random wrong answer: image 0 has 1 twin among its 2 wrong captions (1/2), image 2 none (0)
    assert got["i2t_top1"].tolist() == [1, 1, 1] and got["i2t_rank"].tolist() == [1, 0, 1]
    assert R.error_near_duplicates("i2t", got["i2t_rank"], got["i2t_top1"], text_image, near) == (2, 1, 0.5)
    # caption 0 retrieves image 0 (15 degrees), caption 1 image 1, caption 2 image 2: no T->I error
    assert R.error_near_duplicates("t2i", got["t2i_rank"], got["t2i_top1"], text_image, near) == (0, 0, 0.0)
    # T->I, by hand: caption 0 ranks image 1 first (its twin's image), caption 2 image 1 (not a twin)
    assert R.error_near_duplicates("t2i", [1, 0, 1], [1, 1, 1], text_image, near) == (2, 1, 0.5)
    # several captions per image: a top-1 counts as a near-duplicate through any own caption
    two = np.array([0, 1, 0])  # image 0 has captions 0 and 2 (0 and 90 degrees), image 1 caption 1 (20)
    # image 0's one wrong caption (1) is caption 0's twin: chance 1
    assert R.error_near_duplicates("i2t", [1, 0], [1, 1], two, near) == (1, 1, 1.0)
    # caption 1 retrieves image 0 (near through its caption 0; its one other image: chance 1), caption 2
    # retrieves image 1 (no twin: chance 0)
    assert R.error_near_duplicates("t2i", [0, 1, 1], [0, 0, 1], two, near) == (2, 1, 1.0)


def test_pairwise_outcomes_by_hand_and_as_two_candidate_ranks():
    # scenes (image, caption): (12, 0), (40, 20), (90, 60) degrees; partners 0 <-> 1, 2 -> 1
    images, texts = unit(12.0, 40.0, 90.0), unit(0.0, 20.0, 60.0)
    partner = np.array([1, 0, 1])
    got = R.pairwise_outcomes(images, texts, partner)
    # I->T: scene 0 own caption 12 degrees away, caption 1 only 8: wrong; scene 1 own 20 vs 40: right;
    # scene 2 own 30 vs 70: right
    assert got["i2t"].tolist() == [False, True, True]
    # T->I: caption 0 own image 12 away vs image 1 40: right; caption 20 own image 20 away vs image 0 8:
    # wrong; caption 60 own image 30 away vs image 1 20: wrong
    assert got["t2i"].tolist() == [True, False, False]
    outcomes = R.pairwise_outcomes_as_ranks(got, "toy/test|pairwise")
    assert outcomes.value("i2t_r1") == pytest.approx(200 / 3) and outcomes.value("t2i_r1") == pytest.approx(100 / 3)
    # an exact tie (the partner's caption is the scene's own) counts as wrong
    tie = R.pairwise_outcomes(unit(10.0, 50.0), unit(0.0, 0.0), np.array([1, 0]))
    assert tie["i2t"].tolist() == [False, False]


# ------------------------------------------------------------------------------ dynamics logs
def test_micro_batch_losses_round_trip_and_an_empty_cell_is_not_measured():
    losses = [0.1, 1e-05, 2.5e-300, 0.0]
    assert parse_micro_batch_losses(format_micro_batch_losses(losses)) == losses
    assert parse_micro_batch_losses("") is None and parse_micro_batch_losses(float("nan")) is None
    assert DYNAMICS_COLUMNS[-1] == "infonce_micro"


def test_saturated_micro_batches_find_their_rows_by_step_and_position():
    batches = [R.MicroBatch(1, 1, 0, np.array([0, 1])), R.MicroBatch(1, 1, 1, np.array([2, 3])),
               R.MicroBatch(1, 2, 0, np.array([4, 5])), R.MicroBatch(1, 2, 1, np.array([0, 2])),
               R.MicroBatch(2, 3, 0, np.array([1, 3])), R.MicroBatch(2, 3, 1, np.array([4, 0]))]
    dynamics = pd.DataFrame({"step": [1, 2, 3], "epoch": [1, 1, 2],
                             "infonce_micro": ["0.5 0.0001", "1e-05 0.002", "1e-09 1e-09"]})
    got = R.saturated_micro_batches(dynamics, batches)
    assert [r.tolist() for r in got["saturated"]] == [[2, 3], [4, 5]]
    assert [r.tolist() for r in got["active"]] == [[0, 1], [0, 2]]
    assert got["unmeasured"] == 0
    old = dynamics.drop(columns="infonce_micro")  # a log written before the column
    assert R.saturated_micro_batches(old, batches) == {"saturated": [], "active": [], "unmeasured": 2}
    with pytest.raises(ValueError, match="micro-batch 2"):
        R.saturated_micro_batches(dynamics.assign(infonce_micro=["1 1 1", "1 1", "1 1"]), batches)


def test_the_dynamics_log_of_an_older_loop_is_kept_with_the_new_column_empty(tmp_path):
    from hnclip.training.logs import CsvLog

    log = CsvLog(tmp_path / "dynamics.csv", ("step", "epoch", "infonce_micro"))
    log.start("step,epoch\n1,1\n2,1\n")
    assert log.read_text() == "step,epoch,infonce_micro\n1,1,\n2,1,\n"
    log.append({"step": 3, "epoch": 2, "infonce_micro": "0.5 0.25"})
    assert read_csv_rows(log.path)[-1] == {"step": "3", "epoch": "2", "infonce_micro": "0.5 0.25"}
    with pytest.raises(ValueError, match="another version of the loop"):
        log.start("epoch,step\n1,1\n")


# --------------------------------------------------------------------------- the trainer's batches
def test_rebuilt_micro_batches_and_logged_losses_are_the_trainers_own(tmp_path, monkeypatch):
    """18 rows in effective batches of 4 x 2: two steps per epoch, two rows dropped each epoch; two epochs
    cut short by max_steps = 3. The rows come from the trainer's own forward calls."""
    from hnclip.training.objective import TrainStep

    seen = []
    forward = TrainStep.forward

    def spy(self, batch, margin, standard_with_grad):
        loss, standard, scale, features = forward(self, batch, margin, standard_with_grad)
        seen.append((batch.epoch, batch.positions.tolist(), float(standard.detach())))
        return loss, standard, scale, features

    monkeypatch.setattr(TrainStep, "forward", spy)
    paths = make_dataset(tmp_path, n=18)
    summary = run_training(paths, tmp_path, small_config(gamma=0.0, token_weight=0.0, epochs=2, max_steps=3))
    batches = R.run_micro_batches(summary, n_train=18)
    assert [(b.epoch, b.step, b.position) for b in batches] == [(1, 1, 0), (1, 1, 1), (1, 2, 0), (1, 2, 1),
                                                                (2, 3, 0), (2, 3, 1)]
    assert [b.rows.tolist() for b in batches] == [rows for _, rows, _ in seen]
    assert [b.epoch - 1 for b in batches] == [epoch for epoch, _, _ in seen]
    assert all(len(b.rows) == 4 for b in batches)
    rows = read_csv_rows(tmp_path / "out" / "dynamics.csv")
    logged = [v for r in rows for v in parse_micro_batch_losses(r["infonce_micro"])]
    assert logged == [standard for _, _, standard in seen]  # bit for bit: repr round-trips
    with pytest.raises(ValueError, match="18 rows"):
        R.run_micro_batches(summary, n_train=20)


def test_trainer_micro_batches_slice_epoch_order_by_hand():
    from hnclip.training.batches import epoch_order

    batches = R.trainer_micro_batches(10, seed=3, micro_batch=2, accum_steps=2, epochs=2)
    assert len(batches) == 2 * 2 * 2  # 10 // 4 = 2 steps per epoch, 2 micro-batches each, 2 rows dropped
    for epoch in (0, 1):
        order = epoch_order(10, 3, epoch)
        got = [b.rows.tolist() for b in batches if b.epoch == epoch + 1]
        assert got == [order[0:2].tolist(), order[2:4].tolist(), order[4:6].tolist(), order[6:8].tolist()]
    assert [b.step for b in batches] == [1, 1, 2, 2, 3, 3, 4, 4]
    with pytest.raises(ValueError, match="fewer than one effective batch"):
        R.trainer_micro_batches(3, 0, 2, 2, 1)


# ----------------------------------------------------------------------------------- conditions
def _record(i2t_hits, t2i_hits, method="longclip", seed=0, benchmark="toy"):
    i2t = [0 if h else 1 for h in i2t_hits]
    t2i = [0 if h else 1 for h in t2i_hits]
    return {"run": {"train_set": "toy", "method": method, "gamma": 0.0, "fraction": 1.0, "seed": seed},
            "eval_benchmark": benchmark, "split": "test",
            "metrics": {"i2t_r1": 100.0 * np.mean(i2t_hits), "t2i_r1": 100.0 * np.mean(t2i_hits)},
            "ranks": {"i2t": i2t, "t2i": t2i, "text_image": list(range(len(i2t)))}}


def _plain(record, seed):
    return R.PlainRun(f"runs/toy/longclip/g0/f1/s{seed}", {"seed": seed, "config": {"seed": seed}},
                      pd.DataFrame(), record)


def test_headroom_is_the_paired_difference_with_an_interval_and_both_directions_must_clear_5():
    rng = np.random.default_rng(0)
    zs = rng.random(200) < 0.6
    plain = [_plain(_record(zs | (rng.random(200) < 0.2), zs), s) for s in (0, 1)]
    cond = R.headroom_condition(plain, _record(zs, zs, method="zeroshot"), BootstrapSettings(resamples=500))
    expected = np.mean([p.record["metrics"]["i2t_r1"] for p in plain]) - 100 * zs.mean()
    assert cond["values"]["i2t"] == pytest.approx(expected) and expected > 5
    assert cond["values"]["t2i"] == pytest.approx(0.0)
    low, high = cond["intervals"]["i2t"]
    assert low < expected < high and low > 0  # paired: the shared queries cancel
    assert cond["intervals"]["t2i"] == [0.0, 0.0]  # identical outcomes: no difference in any resample
    assert cond["met"] is False and cond["value"] == pytest.approx(0.0)
    assert set(cond["per_seed"]["i2t"]) == {"0", "1"}


def test_power_needs_test_scenes_seeds_and_a_narrow_paired_interval():
    rng = np.random.default_rng(1)
    base = rng.random(2000) < 0.7
    records = {"hnclip": [(str(s), _record(base | (rng.random(2000) < 0.05), base, "hnclip", s)) for s in range(3)],
               "longclip": [(str(s), _record(base, base, "longclip", s)) for s in range(3)]}
    settings = BootstrapSettings(resamples=500)
    cond = R.power_condition(2000, records, settings)
    v = cond["values"]
    assert v["seeds"] == 3 and v["test_scenes"] == 2000
    lo, hi = cond["intervals"]["difference"]
    assert v["half_width"] == pytest.approx((hi - lo) / 2) and lo < v["difference"] < hi
    assert v["half_width"] < R.POWER_HALF_WIDTH_MAX and cond["met"] is True
    assert R.power_condition(256, records, settings)["met"] is False  # too few test scenes
    one = {m: r[:1] for m, r in records.items()}
    assert R.power_condition(2000, one, settings)["met"] is False  # one seed
    unmeasured = R.power_condition(2000, None, settings)
    assert unmeasured["met"] is None and unmeasured["values"]["half_width"] is None


def test_power_and_the_headline_compare_with_the_strongest_competitor_where_one_is_named():
    """HN-CLIP hits 80 % of 2,000 scenes both ways; the competitor 75 %, Long-CLIP FT 70 % (one seed each): the
    power condition's difference is HN-CLIP minus the competitor (+5.0), and the seed-average difference
    against Long-CLIP FT is +10.0, each with the paired interval of an independent numpy bootstrap."""
    hits = {"hnclip": np.arange(2000) < 1600, "finelip": np.arange(2000) < 1500, "longclip": np.arange(2000) < 1400}
    records = {m: [("0", _record(h, h, m, 0))] for m, h in hits.items()}
    settings = BootstrapSettings(resamples=1000)
    cond = R.power_condition(2000, records, settings, against="finelip")
    assert cond["values"]["difference"] == pytest.approx(5.0) and "hnclip − finelip +5.00" in cond["ours"]
    baseline = R.seed_average_difference(records, "hnclip", "longclip", settings)
    assert baseline["difference"] == pytest.approx(10.0) and baseline["against"] == "longclip"
    # independent reference: per-scene differences (both directions alike), resampled over scenes
    diff = 100.0 * (hits["hnclip"].astype(float) - hits["longclip"])
    rng = np.random.default_rng(5)
    boots = [diff[rng.integers(0, 2000, 2000)].mean() for _ in range(2000)]
    low, high = np.percentile(boots, [2.5, 97.5])
    assert baseline["interval"][0] == pytest.approx(low, abs=0.3) and baseline["interval"][1] == pytest.approx(high, abs=0.3)
    assert R.seed_average_difference(records, "hnclip", "dora", settings) is None


def test_met_is_false_if_a_part_fails_and_unknown_if_a_part_is_unmeasured():
    assert R._all_met([True, True]) is True
    assert R._all_met([True, None]) is None
    assert R._all_met([None, False]) is False


def test_a_part_is_decided_by_its_interval_as_a_claim_is():
    # headroom T->I +4.6 [+2.8, +6.4] against 5: the interval straddles the target
    assert R.decide(4.6, (2.8, 6.4), 5.0) == "undecided"
    assert R.decide(5.5, (3.6, 7.4), 5.0) == "undecided"
    assert R.decide(6.0, (5.0, 7.0), 5.0) == "met"  # a tie meets ">= 5"
    assert R.decide(6.0, (5.0, 7.0), 5.0, ties_pass=False) == "undecided"  # but not "> 5"
    assert R.decide(3.0, (1.0, 4.9), 5.0) == "not met"
    assert R.decide(5.0, None, 5.0) == "met" and R.decide(4.9, None, 5.0) == "not met"  # on its value
    assert R.decide(None, None, 5.0) == "not measured"
    assert R.combine(["met", "undecided", "not measured"]) == "undecided"
    assert R.combine(["met", "not measured"]) == "not measured"
    assert R.combine(["undecided", "not met"]) == "not met"
    assert R.combine([True, True]) == "met" and R.combine([True, None]) == "not measured"
    cond = R.condition("headroom", 4.6, {}, "undecided", "", [])
    assert cond["decision"] == "undecided" and cond["met"] is None
    assert R.condition("headroom", 6, {}, True, "", [])["decision"] == "met"
    with pytest.raises(ValueError, match="decision"):
        R.condition("headroom", 6, {}, "holds", "", [])


def test_geometry_and_batch_conditions_over_the_trainers_batches_by_hand():
    plain = [_plain({}, 0)]
    batches = {plain[0].run_dir: [R.MicroBatch(1, 1, 0, np.array([0, 1, 2])),
                                  R.MicroBatch(2, 2, 0, np.array([2, 3, 4]))]}
    geometry = R.geometry_condition(plain, batches, FEATURES)
    cosines, hardest = [], []
    for rows in ([0, 1, 2], [2, 3, 4]):
        for i in rows:
            others = [math.cos(math.radians(ANGLES[i] - ANGLES[j])) for j in rows if j != i]
            cosines += others
            hardest.append(max(others))
    v = geometry["values"]
    assert v["frac_ge_0.8"] == pytest.approx(np.mean(np.array(cosines) >= 0.8))
    assert v["mean_hardest"] == pytest.approx(np.mean(hardest))
    assert v["hardest_minus_mean"] == pytest.approx(np.mean(hardest) - np.mean(cosines))
    assert "effective dimensions" in geometry["ours"] and 1.0 <= v["effective_dimensions"] <= 2.0  # the plane
    assert geometry["met"] is False
    # what the micro-batches hold: a descriptive figure, no condition (no decision to make)
    batch = R.batch_figures(plain, batches, NEAR)
    assert "batch_near_duplicates" not in R.CONDITION_KEYS and "decision" not in batch
    # epoch 1: [0, 1, 2] holds 0-1; epoch 2: [2, 3, 4] holds 2-3: 1 of 1 micro-batch each, one pair each
    assert batch["mean_share"] == 1.0 and batch["min_share"] == 1.0 and batch["mean_pairs"] == 1.0
    # one micro-batch an epoch: Wilson's 95 % interval of 1 of 1 is [1 / (1 + z^2), 1] = [0.207, 1]
    z2 = 1.959963984540054 ** 2
    assert batch["min_share_interval"] == pytest.approx([1 / (1 + z2), 1.0])
    # random triples of the six: 8 of 20 hold a pair
    assert batch["chance_share"] == pytest.approx(0.4, abs=0.03) and batch["micro_batch"] == 3


def _saturation_case(saturated_rows, active_rows, near=NEAR):
    """One plain run's epoch 1: one micro-batch a step, its logged InfoNCE 1e-5 (saturated) or 0.5 (active)."""
    rows = [*saturated_rows, *active_rows]
    batches = [R.MicroBatch(1, s + 1, 0, np.array(r)) for s, r in enumerate(rows)]
    losses = ["1e-05"] * len(saturated_rows) + ["0.5"] * len(active_rows)
    dynamics = pd.DataFrame({"step": range(1, len(rows) + 1), "epoch": [1] * len(rows),
                             "saturated_share": [1.0 if x == "1e-05" else 0.0 for x in losses], "infonce_micro": losses})
    run = R.PlainRun("runs/toy/longclip/g0/f1/s0", {"seed": 0, "config": {}}, dynamics, {})
    return R.saturation_condition([run], {run.run_dir: batches}, FEATURES, near=near)


def test_saturation_condition_counts_pairs_in_the_saturated_batches():
    rows = {(1, 0): [0, 1], (1, 1): [2, 4], (2, 0): [2, 3], (2, 1): [4, 5]}
    batches = [R.MicroBatch(1, s, p, np.array(r)) for (s, p), r in rows.items()]
    dynamics = pd.DataFrame({"step": [1, 2], "epoch": [1, 1], "saturated_share": [0.5, 1.0],
                             "infonce_micro": ["1e-05 0.5", "1e-04 1e-06"]})
    run = R.PlainRun("runs/toy/longclip/g0/f1/s0", {"seed": 0, "config": {}}, dynamics, {})
    cond = R.saturation_condition([run], {run.run_dir: batches}, FEATURES, near=NEAR)
    # saturated: [0, 1] (a pair), [2, 3] (a pair), [4, 5] (none); active: [2, 4] (none)
    assert cond["values"]["saturated_share_epoch1"] == pytest.approx(0.75)
    assert cond["values"]["saturated_with_pair"] == pytest.approx(2 / 3)
    assert cond["values"]["active_with_pair"] == 0.0 and cond["values"]["n_saturated"] == 3
    assert cond["values"]["saturated_pairs_mean"] == pytest.approx(2 / 3) and cond["values"]["active_pairs_mean"] == 0
    assert cond["values"]["pair_difference"] == pytest.approx(2 / 3) and cond["chance"] == 0.0
    # one non-saturated micro-batch: no spread to build Welch's interval on, so the pair part is undecided
    assert cond["decision"] == "undecided" and cond["met"] is None
    old = R.PlainRun(run.run_dir, run.summary, dynamics.drop(columns="infonce_micro"), {})
    cond = R.saturation_condition([old], {run.run_dir: batches}, FEATURES, near=NEAR)
    assert cond["met"] is None and cond["values"]["saturated_with_pair"] is None
    assert cond["decision"] == "not measured"
    assert "not measured" in cond["ours"]


def test_the_saturation_sub_test_reads_the_papers_direction_on_batches_built_both_ways():
    """The paper: a few highly similar negatives remain unresolved after the easy majority is separated, so a
    micro-batch saturates when it holds fewer near-duplicate pairs. NEAR's pairs: 0-1 and 2-3."""
    with_pairs, without = [[0, 1, 4], [2, 3, 5], [0, 1, 2, 3]], [[0, 2, 4], [1, 3, 5], [0, 4, 5]]
    # the paper's mechanism: 30 saturated micro-batches without a pair, 10 non-saturated with one or two
    mechanism = _saturation_case(without * 10, with_pairs * 4)
    v = mechanism["values"]
    assert v["saturated_pairs_mean"] == 0.0 and v["active_pairs_mean"] == pytest.approx(16 / 12)
    # Welch's interval by hand: the saturated side has no spread; the active side 8 ones and 4 twos
    spread = np.var([1] * 8 + [2] * 4, ddof=1)
    half = 1.959963984540054 * math.sqrt(spread / 12)
    assert mechanism["intervals"]["pair_difference"] == pytest.approx([-16 / 12 - half, -16 / 12 + half])
    assert mechanism["decision"] == "met"
    # the reverse (saturated micro-batches hold the pairs): the sub-test fails whatever the saturated share
    reverse = _saturation_case(with_pairs * 10, without * 4)
    assert reverse["values"]["pair_difference"] > 0 and reverse["decision"] == "not met"
    # no difference at all: pairs spread evenly; the interval straddles 0
    even = _saturation_case((with_pairs + without) * 5, with_pairs + without)
    assert even["values"]["pair_difference"] == pytest.approx(0.0) and even["decision"] == "undecided"


def closed_form_least_infonce(degrees_apart: float, logit_scale: float) -> float:
    """Two captions at angle a: the best image features point along t_i - t_j, so every one of the four
    cross-entropy terms has the margin |t_i - t_j| = sqrt(2 (1 - cos a)) and the least symmetric loss is
    log(1 + exp(-s sqrt(2 (1 - cos a))))."""
    margin = math.sqrt(2 * (1 - math.cos(math.radians(degrees_apart))))
    return math.log1p(math.exp(-logit_scale * margin))


def test_least_infonce_matches_the_closed_forms():
    from hnclip.analysis.geometry import least_infonce

    # two captions 20 degrees apart at s = 10: 0.0306; half a degree apart at s = 100: 0.35
    assert least_infonce(unit(0.0, 20.0), 10.0) == pytest.approx(closed_form_least_infonce(20.0, 10.0), rel=1e-3)
    assert least_infonce(unit(0.0, 0.5), 100.0) == pytest.approx(closed_form_least_infonce(0.5, 100.0), rel=0.02)
    # near the saturation threshold an upper estimate within 10 % (5 degrees at s = 100: 1.6e-4)
    found, optimum = least_infonce(unit(0.0, 5.0), 100.0), closed_form_least_infonce(5.0, 100.0)
    assert optimum <= found <= 1.1 * optimum
    # a repeated caption: its two rows in each direction cannot beat a coin toss, log 2 each of 4 rows
    t = np.eye(3)[[0, 0, 1, 2]]
    assert least_infonce(t, 100.0) == pytest.approx(math.log(2) / 2, abs=1e-4)
    with pytest.raises(ValueError, match="norm"):
        least_infonce(2 * t, 100.0)


def test_least_infonce_batches_are_independent_runs():
    from hnclip.analysis.geometry import least_infonce, least_infonce_batches

    pairs = np.stack([unit(0.0, 0.5), unit(0.0, 5.0), unit(30.0, 50.0)])
    together = least_infonce_batches(pairs, 100.0)
    assert together.tolist() == [least_infonce(p, 100.0) for p in pairs]  # bit for bit: Adam is per coordinate
    assert together[0] == pytest.approx(closed_form_least_infonce(0.5, 100.0), rel=0.02)
    with pytest.raises(ValueError, match="B >= 2"):
        least_infonce_batches(unit(0.0)[None], 100.0)


def test_effective_dimensions_by_hand():
    from hnclip.analysis.geometry import effective_dimensions

    # rows +-e1 .. +-ek: covariance 1/k on k axes, participation ratio k
    for k in (1, 3, 5):
        axes = np.eye(8)[:k]
        assert effective_dimensions(np.concatenate([axes, -axes])) == pytest.approx(k)
    # variances 2 : 1 : 1 (rows +-sqrt(2) e1, +-e2, +-e3): (2 + 1 + 1)^2 / (4 + 1 + 1) = 8/3
    rows = np.array([[2 ** 0.5, 0, 0], [-(2 ** 0.5), 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]])
    assert effective_dimensions(rows) == pytest.approx(8 / 3)
    # a shared offset (the captions' common direction) does not count
    assert effective_dimensions(rows + np.array([5.0, 0, 0])) == pytest.approx(8 / 3)
    assert effective_dimensions(np.ones((4, 3))) == 0.0
    with pytest.raises(ValueError, match="N >= 2"):
        effective_dimensions(np.ones((1, 3)))


def test_least_infonce_scenes_with_one_batch_is_the_closed_form():
    from hnclip.analysis.geometry import least_infonce_scenes

    # two scenes, micro-batches of two: every partition is the same batch, so one feature per scene is
    # one feature per batch and the two-caption closed form holds
    found = least_infonce_scenes(unit(0.0, 20.0), np.array([[0, 1]]), 10.0)
    assert found[0] == pytest.approx(closed_form_least_infonce(20.0, 10.0), rel=1e-3)
    found = least_infonce_scenes(unit(0.0, 0.5), np.array([[1, 0]]), 100.0)
    assert found[0] == pytest.approx(closed_form_least_infonce(0.5, 100.0), rel=0.02)
    with pytest.raises(ValueError, match="evaluation must be"):
        least_infonce_scenes(unit(0.0, 20.0), np.array([[0, 1, 0]]), 10.0)


def test_least_infonce_scenes_repeated_caption_costs_log_2_and_distinct_ones_saturate():
    from hnclip.analysis.geometry import least_infonce_scenes

    # scenes 0 and 1 share a caption: in a batch together no feature tells them apart (log 2 on each of
    # the four cross-entropy rows); scenes 2 and 3 have orthogonal captions of their own, and one feature
    # each (2 along e1 away from e0 and e2) sets them apart from every caption by a margin of ~1.15
    captions = np.eye(3)[[0, 0, 1, 2]]
    found = least_infonce_scenes(captions, np.array([[0, 1], [2, 3]]), 100.0)
    assert found[0] == pytest.approx(math.log(2), abs=1e-6)
    assert found[1] < 1e-30


def test_least_infonce_scenes_is_no_lower_than_fitting_each_batch():
    from hnclip.analysis.geometry import least_infonce_batches, least_infonce_scenes

    # 64 crowded captions in 8 dimensions (median pairwise cosine 0.87, the paper's 0.84-0.88): features
    # fitted per batch (a relaxation) reach at least as low as one feature per scene on the same batches;
    # here every batch is saturable when fitted alone (< 1e-3) and none with one feature per scene
    rng = np.random.default_rng(0)
    raw = np.eye(8)[0] + 0.15 * rng.standard_normal((64, 8))
    captions = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    assert np.median((captions @ captions.T)[~np.eye(64, dtype=bool)]) == pytest.approx(0.87, abs=0.01)
    evaluation = rng.permutation(64).reshape(4, 16)
    per_batch = least_infonce_batches(captions[evaluation], 100.0)
    per_scene = least_infonce_scenes(captions, evaluation, 100.0)
    assert np.all(per_scene >= per_batch)
    assert np.all(per_batch < R.SATURATION_LOSS) and np.all(per_scene > R.SATURATION_LOSS)


def test_saturable_micro_batches_counts_epoch_one_batches_below_the_threshold():
    features = unit(0.0, 20.0, 90.0, 95.0, 180.0, 180.5)
    batches = [R.MicroBatch(1, 1, 0, np.array([0, 1])), R.MicroBatch(1, 1, 1, np.array([2, 3])),
               R.MicroBatch(1, 2, 0, np.array([4, 5])), R.MicroBatch(2, 3, 0, np.array([4, 5]))]
    least = [closed_form_least_infonce(a, 100.0) for a in (20.0, 5.0, 0.5)]  # 8e-16, 1.6e-4, 0.35
    assert least[0] < R.SATURATION_LOSS and least[1] < R.SATURATION_LOSS and least[2] > R.SATURATION_LOSS
    bound = R.saturable_micro_batches(features, batches, 100.0)
    assert bound["n_bound_micro_batches"] == 3  # the epoch-2 batch is not counted
    assert bound["saturable_share"] == pytest.approx(2 / 3)
    assert least[1] <= bound["least_infonce_median"] <= 1.1 * least[1]
    # one feature per scene cannot beat features fitted per batch (0.35 stays above the threshold)
    assert bound["scene_infonce_median"] >= least[1] and bound["scene_saturable_share"] <= 2 / 3
    assert bound["n_bound_scenes"] == 6
    # a split cut to the micro-batches' own scenes (and a draw of the rest) keeps every one of those
    cut = R.saturable_micro_batches(features, batches, 100.0, max_scenes=2)
    assert cut["n_bound_scenes"] == 6 and cut["saturable_share"] == bound["saturable_share"]
    cut = R.saturable_micro_batches(features, batches, 100.0, limit=1, max_scenes=3)
    assert cut["n_bound_scenes"] == 3 and cut["n_bound_micro_batches"] == 1
    assert R.saturable_micro_batches(features, batches, 100.0, limit=2)["saturable_share"] == 1.0
    assert R.saturable_micro_batches(features, batches[3:], 100.0)["saturable_share"] is None
    # micro-batches of one caption (micro_batch: 1) have no negative to saturate against: left out, no error
    single = [R.MicroBatch(1, k + 1, 0, np.array([k])) for k in range(3)]
    assert R.saturable_micro_batches(features, single, 100.0)["n_bound_micro_batches"] == 0


def test_saturation_condition_shows_what_the_captions_allow_beside_it():
    features = unit(0.0, 20.0, 90.0, 100.0, 180.0, 180.5)
    batches = [R.MicroBatch(1, 1, 0, np.array([0, 1])), R.MicroBatch(1, 1, 1, np.array([4, 5]))]
    dynamics = pd.DataFrame({"step": [1], "epoch": [1], "saturated_share": [0.5], "infonce_micro": ["1e-05 0.5"]})
    run = R.PlainRun("runs/toy/longclip/g0/f1/s0", {"seed": 0, "config": {}}, dynamics, {})
    plain = R.saturation_condition([run], {run.run_dir: batches}, features)
    assert "saturable_share" not in plain["values"] and "allow" not in plain["ours"]
    cond = R.saturation_condition([run], {run.run_dir: batches}, features, logit_scale=100.0)
    assert cond["values"]["saturable_share"] == pytest.approx(0.5)
    assert cond["values"]["n_bound_micro_batches"] == 2
    assert "the captions allow 50.0 %" in cond["ours"]
    assert f"{100 * cond['values']['scene_saturable_share']:.1f} % with one feature per scene" in cond["ours"]
    # a diagnostic only: the verdict is the measured saturation's
    assert cond["met"] == plain["met"] and cond["value"] == plain["value"]


def test_learnable_condition_is_the_share_of_the_backbones_pairwise_errors_plain_ft_fixes():
    captions = unit(0.0, 20.0, 60.0)  # hardest partners: 0 <-> 1, 2 -> 1
    zeroshot = R.ModelFeatures(unit(12.0, 40.0, 90.0), captions)  # I->T [F, T, T], T->I [T, F, F]
    plain = [_plain({}, 0), _plain({}, 1)]
    plain[0].features = R.ModelFeatures(unit(0.0, 20.0, 60.0), captions)  # every scene right both ways
    plain[1].features = zeroshot  # fixes nothing, breaks nothing
    near = R.NearDuplicates.of(captions, z=0.5, floor=0.9)  # 0 <-> 1 only (cos 20 = 0.94)
    assert [sorted(p) for p in near.partners] == [[1], [0], []]
    cond = R.learnable_condition(plain, zeroshot, np.arange(3), np.arange(3), captions,
                                 BootstrapSettings(resamples=200), "toy/test", near=near)
    v = cond["values"]
    # I->T: 1 backbone error per seed, fixed by seed 0 only: 1 of 2; T->I: 2 per seed, 2 of 4 fixed
    assert v["i2t"] == pytest.approx(0.5) and v["t2i"] == pytest.approx(0.5)
    assert v["i2t_broken"] == 0.0 and v["t2i_broken"] == 0.0
    assert v["i2t_backbone_errors"] == 1 and v["t2i_backbone_errors"] == 2
    assert v["zeroshot_i2t"] == pytest.approx(200 / 3) and v["plain_i2t"] == pytest.approx((100 + 200 / 3) / 2)
    assert cond["per_seed"]["i2t"] == {"0": 1.0, "1": 0.0}
    # Wilson's 95 % interval of 2 of 4, by the textbook formula
    z = 1.959963984540054
    centre, half = (0.5 + z * z / 8) / (1 + z * z / 4), z * math.sqrt(0.25 / 4 + z * z / 64) / (1 + z * z / 4)
    assert cond["intervals"]["t2i"] == pytest.approx([centre - half, centre + half])
    assert cond["decision"] == "undecided"  # 1 of 2 and 2 of 4 cannot tell 50 % from 25 %
    assert v["partner_near_duplicate_share"] == pytest.approx(2 / 3)  # 2's partner (40 degrees) is no twin


# -------------------------------------------------------------------------------------- the verb
def _eval(model_dir, manifest, store, out, run):
    from hnclip.evaluate import evaluate_checkpoint

    return evaluate_checkpoint(model_dir, manifest, store, out, run_info=run, eval_benchmark="toy", device="cpu")


def test_the_regime_verb_end_to_end_on_a_micro_model(tmp_path, monkeypatch):
    from hnclip.analysis.geometry_job import encode_captions
    from hnclip.cli import main
    from hnclip.models import load_model
    from hnclip.train import train
    from hnclip.training.batches import epoch_order

    monkeypatch.chdir(tmp_path)
    paths = make_dataset(tmp_path / "data", n=16)
    run_dir = Path("results/runs/toy/longclip/g0/f1/s0")
    cfg = small_config(gamma=0.0, token_weight=0.0, epochs=2, eval_every_epoch=False)
    train(cfg, out_dir=run_dir, checkpoint_dir=tmp_path / "ckpt", **paths)
    run = {"train_set": "toy", "method": "longclip", "gamma": 0.0, "fraction": 1.0, "seed": 0}
    manifest, store = paths["train_manifest"], paths["store_dir"]  # the training split doubles as the test split
    plain_eval = Path("results/evals/toy/longclip/g0/f1/s0/toy.json")
    hn_eval = Path("results/evals/toy/hnclip/g0.5/f1/s0/toy.json")
    zs_eval = Path("results/evals/zeroshot/toy.json")
    _eval(run_dir / "model", manifest, store, plain_eval, run)
    _eval(run_dir / "model", manifest, store, hn_eval, run | {"method": "hnclip", "gamma": 0.5})
    zeroshot = _eval(paths["init_model_dir"], manifest, store, zs_eval,
                     {"train_set": "none", "method": "zeroshot", "gamma": 0.0, "fraction": 0.0, "seed": 0})
    spec = {"experiment": "main", "scale": "toy", "cells": [
        {"row": "HN-CLIP", "group": "Toy", "run": run | {"method": "hnclip", "gamma": 0.5}, "eval_benchmark": "toy",
         "eval_path": str(hn_eval), "run_dir": "x"},
        {"row": "Long-CLIP FT", "group": "Toy", "run": run, "eval_benchmark": "toy", "eval_path": str(plain_eval),
         "run_dir": str(run_dir)}]}
    Path("results/specs").mkdir(parents=True)
    Path("results/specs/main.json").write_text(json.dumps(spec))
    out = Path("results/regime/toy.json")
    assert main(["regime", "--benchmark", "toy", "--backbone", str(paths["init_model_dir"]),
                 "--train-manifest", str(manifest), "--test-manifest", str(manifest), "--test-images", str(store),
                 "--zeroshot", str(zs_eval), "--runs", str(run_dir / "summary.json"), "--evals", str(plain_eval),
                 "--main-spec", "results/specs/main.json", "--confidence", "0.95", "--resamples", "200",
                 "--bootstrap-seed", "0", "--device", "cpu",
                 "--out", str(out)]) == 0
    report = R.load_regime(out)
    conditions = {c["key"]: c for c in report["conditions"]}
    assert tuple(conditions) == R.CONDITION_KEYS and report["n_test_images"] == 16
    plain_record = json.loads(plain_eval.read_text())
    assert conditions["headroom"]["values"]["i2t"] == pytest.approx(
        plain_record["metrics"]["i2t_r1"] - zeroshot["metrics"]["i2t_r1"])
    # the recomputed ranks reproduce the evaluation records'
    assert conditions["errors_near_duplicate"]["rank_agreement"] == {
        "zeroshot": {"i2t": 1.0, "t2i": 1.0}, "0": {"i2t": 1.0, "t2i": 1.0}}
    # the new log column: every epoch-1 micro-batch measured
    assert conditions["saturation"]["unmeasured_steps"] == 0
    assert conditions["saturation"]["values"]["saturated_share_epoch1"] is not None
    # what the captions allow, at the backbone's logit scale, on the run's epoch-1 micro-batches (16 rows in 4s)
    assert conditions["saturation"]["values"]["n_bound_micro_batches"] == 4
    assert 0.0 <= conditions["saturation"]["values"]["saturable_share"] <= 1.0
    assert conditions["power"]["values"] == {"test_scenes": 16, "seeds": 1, "half_width": pytest.approx(0.0),
                                             "difference": 0.0, "seeds_for_target": 1}
    assert conditions["power"]["met"] is False
    # the micro-batches' figure by a loop over the trainer's permutation, with the backbone's caption features
    captions = list(pd.read_csv(manifest)["caption"])
    feats = encode_captions(load_model(paths["init_model_dir"]), captions, device="cpu").double().numpy()
    feats /= np.linalg.norm(feats, axis=1, keepdims=True)
    partners = brute_partners(feats, R.NEAR_DUPLICATE_Z, R.GEOMETRY_COSINE)
    shares = []
    for epoch in range(2):
        order = epoch_order(16, 0, epoch)
        batches = [set(order[start:start + 4].tolist()) for start in range(0, 16, 4)]
        shares.append(np.mean([any(partners[i] & rows for i in rows) for rows in batches]))
    assert report["near_duplicates"]["micro_batches"]["mean_share"] == pytest.approx(np.mean(shares))
    assert report["near_duplicates"]["micro_batches"]["min_share"] == pytest.approx(min(shares))
    text = R.format_conditions(report)
    assert all(c["target"] in text for c in report["conditions"])
    # which backbone: its weight digest (no training summary beside this one, so no kernels)
    from hnclip.hashing import weights_digest

    assert report["backbone_identity"] == {"weights": weights_digest(paths["init_model_dir"]), "cpu_kernels": None}


def test_backbone_identity_reads_the_pretraining_summary_beside_the_model(tmp_path):
    from safetensors.numpy import save_file

    from hnclip.analysis.regime_job import backbone_identity

    model = tmp_path / "backbone" / "model"
    model.mkdir(parents=True)
    save_file({"w": np.arange(3, dtype=np.float32)}, str(model / "model.safetensors"))
    kernels = {"setting": "portable", "capability": "DEFAULT", "onednn": False, "cpu": "Some CPU (AVX512, AVX2)"}
    (tmp_path / "backbone" / "summary.json").write_text(json.dumps({"cpu_kernels": kernels}))
    identity = backbone_identity(model)
    assert identity["cpu_kernels"] == kernels
    assert len(identity["weights"]) == 16
    assert backbone_identity(tmp_path / "elsewhere") == {"weights": None, "cpu_kernels": None}


def test_plain_runs_and_regime_benchmarks_of_the_embedded_default():
    import yaml

    from hnclip import plan
    from hnclip.config.validation import validate_config

    repo = Path(__file__).resolve().parents[1]
    config = yaml.safe_load((repo / "config/config.yaml").read_text())
    validate_config(config, repo / "workflow/schemas/config.schema.yaml")
    assert [r.path for r in plan.plain_runs(config, "synthetic")] == [
        f"synthetic/longclip/g0/f1/s{s}" for s in (0, 1, 2)]
    assert plan.plain_runs(config, "synthetic_shift") == []  # no train set of its own
    assert plan.regime_benchmarks(config) == ["synthetic"]
    # condition 7 and the headline read the seeds experiment (HN-CLIP, Long-CLIP FT and the strongest competitor,
    # every seed), else the main table's first seed
    experiment, cells = plan.main_comparison(config, "synthetic")
    assert config["competitor"] == "finelip"
    assert experiment == "seeds" and sorted(c["run_dir"] for c in cells) == sorted(
        [f"results/runs/synthetic/{m}/f1/s{s}" for m in ("hnclip/g0.5", "longclip/g0", "finelip/g0")
         for s in (0, 1, 2)])
    no_seeds = {**config, "experiments": {k: v for k, v in config["experiments"].items() if k != "seeds"}}
    experiment, cells = plan.main_comparison(no_seeds, "synthetic")
    assert experiment == "main" and sorted(c["run_dir"] for c in cells) == [
        "results/runs/synthetic/finelip/g0/f1/s0", "results/runs/synthetic/hnclip/g0.5/f1/s0",
        "results/runs/synthetic/longclip/g0/f1/s0"]
    assert plan.main_comparison(config, "synthetic_shift") is None


def test_seeds_for_half_width_scales_the_width_as_one_over_root_seeds_by_hand():
    # 3 seeds at half-width 2.82: 3 * (2.82 / 1.5)^2 = 10.60 -> 11 seeds
    assert R.seeds_for_half_width(2.82, 3) == 11
    # exactly on target: no more seeds; already narrower: never fewer than measured
    assert R.seeds_for_half_width(1.5, 4) == 4
    assert R.seeds_for_half_width(0.5, 3) == 3
    # 10 seeds at 1.68: 10 * 1.2544 = 12.54 -> 13
    assert R.seeds_for_half_width(1.68, 10) == 13
    # another target: 3 * (3 / 1)^2 = 27
    assert R.seeds_for_half_width(3.0, 3, target=1.0) == 27
    assert R.seeds_for_half_width(0.0, 3) == 3  # identical models: nothing to narrow
    with pytest.raises(ValueError):
        R.seeds_for_half_width(-0.1, 3)


def test_power_condition_states_the_projected_seeds_only_when_the_interval_is_too_wide():
    rng = np.random.default_rng(2)
    base = rng.random(400) < 0.7
    # every seed of hnclip flips an independent 30 % of scenes: a wide interval over 3 seeds
    records = {"hnclip": [(str(s), _record(np.where(rng.random(400) < 0.3, ~base, base), base, "hnclip", s))
                          for s in range(3)],
               "longclip": [(str(s), _record(base, base, "longclip", s)) for s in range(3)]}
    cond = R.power_condition(400, records, BootstrapSettings(resamples=300))
    v = cond["values"]
    assert v["half_width"] > R.POWER_HALF_WIDTH_MAX  # 2.6 with this draw
    assert v["seeds_for_target"] == R.seeds_for_half_width(v["half_width"], 3) > 3
    assert f"~{v['seeds_for_target']} seeds" in cond["ours"]
    narrow = {m: [(s, _record(base, base, m, int(s))) for s, _ in r] for m, r in records.items()}
    cond = R.power_condition(400, narrow, BootstrapSettings(resamples=300))
    assert cond["values"]["seeds_for_target"] == 3 and "seeds if it shrinks" not in cond["ours"]


def test_strong_init_needs_both_directions_at_the_target_with_a_bootstrap_interval():
    rng = np.random.default_rng(3)
    strong = _record(rng.random(1000) < 0.7, rng.random(1000) < 0.6, method="zeroshot")
    cond = R.strong_init_condition(strong, BootstrapSettings(resamples=500))
    assert cond["values"]["i2t"] == pytest.approx(strong["metrics"]["i2t_r1"])
    assert cond["met"] is True and cond["value"] == pytest.approx(strong["metrics"]["t2i_r1"])
    assert cond["decision"] == "met" and R.STRONG_INIT_MAX == 89.5
    low, high = cond["intervals"]["t2i"]
    # a binomial R@1 over 1,000 queries: about ±3 points at 95 %
    assert low < cond["values"]["t2i"] < high and 4 < high - low < 8
    weak = _record(rng.random(1000) < 0.7, rng.random(1000) < 0.45, method="zeroshot")
    assert R.strong_init_condition(weak, BootstrapSettings(resamples=200))["met"] is False
    # strong but imperfect: a backbone that leaves fewer than 10.5 % of the queries wrong is at the ceiling
    perfect = _record(rng.random(1000) < 0.97, rng.random(1000) < 0.7, method="zeroshot")
    assert R.strong_init_condition(perfect, BootstrapSettings(resamples=200))["decision"] == "not met"
    edge = _record(np.arange(1000) % 10 != 0, rng.random(1000) < 0.7, method="zeroshot")  # I->T exactly 90
    assert R.strong_init_condition(edge, BootstrapSettings(resamples=200))["decision"] == "undecided"


@pytest.mark.parametrize(("mean", "hardest", "frac", "met"), [
    (0.85, 0.93, 0.9, True),
    (0.79, 0.93, 0.9, False),  # below the band's mean
    (0.85, 0.96, 0.9, False),  # crowded past the paper's hardest: no room to saturate
    (0.85, 0.93, 0.995, False),  # every negative >= 0.8
])
def test_geometry_is_met_only_inside_the_papers_band(monkeypatch, mean, hardest, frac, met):
    monkeypatch.setattr(R.conditions, "batch_geometry", lambda features, rows: {
        "mean_offdiag": mean, "mean_hardest": hardest, "frac_ge_0.8": frac, "n_pairs": 10})
    plain = [_plain({}, 0)]
    cond = R.geometry_condition(plain, {plain[0].run_dir: [R.MicroBatch(1, 1, 0, np.array([0, 1, 2]))]}, FEATURES)
    assert cond["met"] is met


def test_transfer_is_readable_only_when_every_target_clears_the_target_both_ways():
    rng = np.random.default_rng(4)
    good = _record(rng.random(500) < 0.4, rng.random(500) < 0.35, method="zeroshot", benchmark="a")
    chance = _record(rng.random(500) < 0.01, rng.random(500) < 0.3, method="zeroshot", benchmark="b")
    settings = BootstrapSettings(resamples=200)
    cond = R.transfer_condition({"a": (good, "ea.json"), "b": (chance, "eb.json")}, settings)
    assert cond["met"] is False and cond["values"]["b.i2t"] == pytest.approx(chance["metrics"]["i2t_r1"])
    assert cond["sources"] == ["ea.json", "eb.json"] and "a: I→T" in cond["ours"]
    assert R.transfer_condition({"a": (good, "ea.json")}, settings)["met"] is True
    none = R.transfer_condition({}, settings)
    assert none["met"] is None and none["value"] is None


def test_backbone_identity_of_a_released_backbone_names_the_release_and_its_kernels(tmp_path):
    from safetensors.numpy import save_file

    from hnclip.analysis.regime_job import backbone_identity

    save_file({"w": np.arange(3, dtype=np.float32)}, str(tmp_path / "model.safetensors"))
    kernels = {"setting": "avx2", "cpu": "Some CPU"}
    (tmp_path / "release.json").write_text(json.dumps({"name": "toy-v1", "built": {"cpu_kernels": kernels}}))
    identity = backbone_identity(tmp_path)
    assert identity["release"] == "toy-v1" and identity["cpu_kernels"] == kernels
