"""The onerror hook's reading (hnclip.job_errors): each failed job's log files from Snakemake's own log, and
the last line of each (the job's error), against hand-written logs in Snakemake 9's wording."""

from __future__ import annotations

from hnclip.job_errors import failed_job_logs, job_error_lines

SNAKEMAKE_LOG = """\
Building DAG of jobs...
[Sat Dec  5 23:58:13 2026]
localrule fetch_benchmark:
    output: results/data/mine/source.json
    log: results/logs/fetch_benchmark/mine.log
    jobid: 1
RuleException:
CalledProcessError in file "workflow/rules/data.smk", line 24:
Command 'python -m hnclip fetch ... 2> results/logs/fetch_benchmark/mine.log' returned non-zero exit status 1.
[Sat Dec  5 23:58:13 2026]
Error in rule fetch_benchmark:
    message: None
    jobid: 1
    output: results/data/mine/source.json
    log: results/logs/fetch_benchmark/mine.log (check log file(s) for error details)
    shell:
        python -m hnclip fetch ... 2> results/logs/fetch_benchmark/mine.log
        (command exited with non-zero exit code)
Error in rule two_logs:
    jobid: 2
    log: logs/a.log, logs/b.log (check log file(s) for error details)
Error in rule no_log:
    jobid: 3
    output: x
Exiting because a job execution failed. Look above for error messages
"""


def test_the_failed_jobs_log_files_are_read_from_snakemakes_log():
    assert failed_job_logs(SNAKEMAKE_LOG) == [("fetch_benchmark", ["results/logs/fetch_benchmark/mine.log"]),
                                              ("two_logs", ["logs/a.log", "logs/b.log"])]


def test_each_failed_jobs_last_line_is_printed_under_its_rule(tmp_path):
    (tmp_path / "snakemake.log").write_text(SNAKEMAKE_LOG)
    fetch_log = tmp_path / "results/logs/fetch_benchmark/mine.log"
    fetch_log.parent.mkdir(parents=True)
    fetch_log.write_text("2026-12-05 INFO hnclip: starting\nrendering: 10%|#\rrendering: 20%|##\n"
                         "benchmarks.mine.root = '/data/mine' holds files hnclip did not make\n\n")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs/a.log").write_text("Traceback (most recent call last):\n  ...\nValueError: a.log's error\n")
    (tmp_path / "logs/b.log").write_text("")
    lines = job_error_lines([tmp_path / "snakemake.log", tmp_path / "absent.log"], workdir=tmp_path)
    assert lines == [
        "rule fetch_benchmark (results/logs/fetch_benchmark/mine.log): benchmarks.mine.root = '/data/mine' holds "
        "files hnclip did not make",
        "rule two_logs (logs/a.log): ValueError: a.log's error",
        "rule two_logs (logs/b.log): (the log is empty)",
    ]


def test_a_job_killed_while_drawing_a_progress_bar_is_said_to_be_so_not_shown_as_the_bar(tmp_path):
    from hnclip.job_errors import last_line

    cases = {
        "INFO epoch 1\nencode images:  40%|####      | 2/5 [00:01<00:02,  1.5it/s]":
            "during 'encode images' at 40%",
        "INFO loading\rLoading weights:  17%|#7": "during 'Loading weights' at 17%",  # cut mid-bar
        "dci annotations: 12file [00:03, 3.9file/s]": "during 'dci annotations' without",
        " 60%|######    | 3/5": "stopped at 60% without",
    }
    for i, (text, where) in enumerate(cases.items()):
        log = tmp_path / f"{i}.log"
        log.write_text(text)
        line = last_line(log)
        assert line.startswith("(no error line: the job stopped") and where in line and "killed" in line, line
    for text in ("ValueError: 40% of the captions are empty | check the split",  # an error that has a % and |
                 "hnclip train: terminated by SIGTERM at step 3/12"):
        (tmp_path / "error.log").write_text(f"encode images:  40%|####\n{text}\n")
        assert last_line(tmp_path / "error.log") == text


def test_a_job_killed_after_an_ordinary_log_record_is_said_to_be_so_naming_what_it_logged_last(tmp_path):
    from hnclip.job_errors import last_line

    # a trainer killed with -9 just after an epoch's evaluation: tqdm closed its bar with a cursor-up escape
    # (ESC[A) and the epoch's INFO record followed; written by hand as the log holds it
    record = "2026-12-07 14:02:11,532 INFO hnclip.train: epoch 4: test R@1 I->T 41.2 T->I 39.8"
    cases = {
        f"train:  50%|#####     | 4/8 [00:09<00:09]\n\x1b[A{record}\n": record,
        f"{record}\n": record,
        # colour codes around the level, a DEBUG and a WARNING record: ordinary records too
        "2026-12-07 14:02:11,532 \x1b[32mDEBUG\x1b[0m hnclip.data: cached\n":
            "2026-12-07 14:02:11,532 DEBUG hnclip.data: cached",
        "2026-12-07 14:02:11 WARNING hnclip.training.session: 3 captions cut\n":
            "2026-12-07 14:02:11 WARNING hnclip.training.session: 3 captions cut",
    }
    for i, (text, logged) in enumerate(cases.items()):
        log = tmp_path / f"{i}.log"
        log.write_text(text)
        line = last_line(log)
        assert line == (f"(no error line: the job stopped without a message after logging {logged!r}; killed from "
                        "outside? a signal (kill -9, a time limit) or the out-of-memory killer)"), line
        assert "\x1b" not in line
    # a very long record is cut in the quote
    (tmp_path / "long.log").write_text(f"2026-12-07 14:02:11,532 INFO hnclip.x: {'a' * 500}\n")
    assert "a" * 120 + "...'" in last_line(tmp_path / "long.log") and "a" * 200 not in last_line(tmp_path / "long.log")
    # error lines stay the job's error, escapes stripped: an ERROR record, a traceback's last line
    for text, shown in (("2026-12-07 14:02:11,532 ERROR hnclip.cli: disk full\n",
                         "2026-12-07 14:02:11,532 ERROR hnclip.cli: disk full"),
                        ("\x1b[AValueError: benchmarks.mine.root is empty\n", "ValueError: benchmarks.mine.root is empty")):
        (tmp_path / "error.log").write_text(text)
        assert last_line(tmp_path / "error.log") == shown


def test_escape_codes_before_a_progress_bar_do_not_hide_it(tmp_path):
    from hnclip.job_errors import last_line

    (tmp_path / "bar.log").write_text("INFO loading\n\x1b[A\x1b[2Kencode images:  40%|####      | 2/5 [00:01<00:02]")
    line = last_line(tmp_path / "bar.log")
    assert line.startswith("(no error line: the job stopped during 'encode images' at 40% without a message")
