"""hnclip.paths, the results layout, against paths written out by hand."""

from hnclip import paths


def test_a_run_is_named_by_its_fields_with_plain_numbers():
    run = {"train_set": "docci", "method": "hnclip", "gamma": 0.5, "fraction": 1.0, "seed": 0}
    assert paths.run_name(run) == "docci/hnclip/g0.5/f1/s0"
    assert paths.run_dir(paths.run_name(run)) == "results/runs/docci/hnclip/g0.5/f1/s0"
    assert paths.eval_path("docci/hnclip/g0.5/f1/s0", "dci") == "results/evals/docci/hnclip/g0.5/f1/s0/dci.json"


def test_a_run_folder_gives_back_its_run_and_train_set():
    assert paths.run_of_dir("results/runs/dci/longclip/g0/f0.2/s1") == "dci/longclip/g0/f0.2/s1"
    assert paths.run_of_dir("elsewhere/model") == "elsewhere/model"
    assert paths.train_set_of_dir("results/runs/dci/longclip/g0/f0.2/s1") == "dci"
    assert paths.train_set_of_dir("/tmp/x/results/runs/vg/lora/g0/f1/s0/model") == "vg"
    assert paths.train_set_of_dir("results/runs") is None
    assert paths.train_set_of_dir("results/evals/dci/x.json") is None


def test_a_run_folder_or_its_benchmark_file_parses_back_to_its_fields():
    assert paths.parse_run_path("results/runs/docci/hnclip/g0.5/f1/s0") == ("docci", "hnclip", "0.5", "1", "0")
    assert paths.parse_run_path("/abs/results/runs/dci/longclip/g0/f0.25/s2/") == ("dci", "longclip", "0", "0.25", "2")
    assert paths.parse_run_path("results/benchmarks/train/vg/lora/g0/f1/s1.tsv") == ("vg", "lora", "0", "1", "1")
    assert paths.parse_run_path("results/runs/docci/hnclip/g0.5/f1") is None  # no seed
    assert paths.parse_run_path("results/runs/docci/hnclip/x0.5/f1/s0") is None
    assert paths.parse_run_path("results/evals/docci/hnclip/g0.5/f1/s0/dci.json") is None
