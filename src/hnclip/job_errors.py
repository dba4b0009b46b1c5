"""The failed jobs' own error lines, for the console: read by the Snakefile's ``onerror`` hook.

A job's message goes to its rule's log (``2> {log}``), and Snakemake's console shows only the shell's
``CalledProcessError`` and the log's path, so a refusal that names its config key (``benchmarks.<b>.root``)
stays one ``cat`` away. ``onerror`` receives Snakemake's own log file (the documented ``log``), whose
"Error in rule" blocks list each failed job's log files; the last line of each is the job's error (the
``hnclip VERB: ...`` line of a refusal, the exception's line of a traceback), printed under the rule's
name. Reads only; a log that is missing or empty is said to be so.

A job killed from outside (``kill -9``, the kernel's out-of-memory killer, a scheduler's time limit) writes
no error line: its log ends in whatever it was drawing, often half a progress bar ("encode images:
40%|████"), or in an ordinary log record ("... INFO hnclip.train: epoch 4 ..."), which a bar closed just
before may have prefixed with a terminal escape (``ESC[A``, cursor up). Neither is passed off as the job's
error: terminal escapes are stripped, and the line says the job stopped without a message, where it was (the
bar's label and share, or the last thing it logged) and the likely causes. A record at ERROR or above is an
error line and is shown as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

__all__ = ["failed_job_logs", "job_error_lines", "last_line"]

_RULE = re.compile(r"^Error in rule (\S+?):\s*$")
_LOG = re.compile(r"^\s+log: (.+?) \(check log file\(s\) for error details\)\s*$")
_MAX_CHARS = 2000  # one line of a log can be a progress bar's whole history
# a tqdm bar as drawn in a log: "label: 40%|####      | 2/5 [00:01<00:02, 1.5it/s]" (cut anywhere after the
# "%|"), or a bar without a total: "label: 12it [00:03, 3.9it/s]"
_BAR = re.compile(r"^(?:(?P<label>[^|]*?):\s*)?(?:(?P<share>\d{1,3})%\|.*|\d+(?:\.\d+)?[kMG]?[A-Za-z/]* \[\d+:\d\d.*)$")
# a terminal escape sequence (CSI: ESC [ ... final byte, e.g. tqdm's cursor-up ESC[A; or OSC: ESC ] ... BEL)
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
# an ordinary record of the verbs' logging format (hnclip.cli: "%(asctime)s %(levelname)s %(name)s: %(message)s")
_RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[,.]\d+)? (?:DEBUG|INFO|WARNING) \S+: .*$")
_SHOWN = 160  # characters of the last record quoted
_KILLED = "killed from outside? a signal (kill -9, a time limit) or the out-of-memory killer"


def failed_job_logs(snakemake_log: str) -> list[tuple[str, list[str]]]:
    """(rule, [its log files]) of each "Error in rule" block of Snakemake's log text, in order, once each."""
    found, rule = [], None
    for line in snakemake_log.splitlines():
        match = _RULE.match(line)
        if match:
            rule = match.group(1)
            continue
        match = _LOG.match(line)
        if match and rule is not None:
            entry = (rule, [p.strip() for p in match.group(1).split(",") if p.strip()])
            if entry not in found:
                found.append(entry)
            rule = None
    return found


def last_line(path: Path) -> str:
    """The last non-blank line of the file at ``path`` (at most :data:`_MAX_CHARS`), or why there is none."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            tail = handle.read().decode("utf-8", "replace")
    except OSError as err:
        return f"(no log: {err.strerror})"
    # a progress bar redraws with carriage returns: its last state is the text after the last one
    lines = [line.rsplit("\r", 1)[-1].strip() for line in _ANSI.sub("", tail).splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return "(the log is empty)"
    last = lines[-1]
    if _RECORD.match(last):
        shown = last if len(last) <= _SHOWN else last[:_SHOWN] + "..."
        return f"(no error line: the job stopped without a message after logging {shown!r}; {_KILLED})"
    bar = _BAR.match(last)
    if bar is None:
        return last[-_MAX_CHARS:]
    where = f" during {bar.group('label')!r}" if bar.group("label") else ""
    share = f" at {bar.group('share')}%" if bar.group("share") else ""
    return f"(no error line: the job stopped{where}{share} without a message; {_KILLED})"


def job_error_lines(snakemake_logs: Iterable, workdir=".") -> list[str]:
    """``rule <name> (<log>): <its last line>`` for each failed job in ``snakemake_logs`` (Snakemake's log
    files, as ``onerror`` receives them; relative job logs are taken against ``workdir``)."""
    lines = []
    for snakemake_log in snakemake_logs:
        try:
            text = Path(snakemake_log).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for rule, logs in failed_job_logs(text):
            for log in logs:
                lines.append(f"rule {rule} ({log}): {last_line(Path(workdir) / log)}")
    return lines
