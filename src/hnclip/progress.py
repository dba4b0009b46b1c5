"""Progress lines on stdout while a run trains: what Snakemake's console shows of a running job.

The training rules send a job's stderr (logging, tqdm's bar) to its log file (``2> {log}``) and leave
stdout alone; Snakemake's local executor passes a job's stdout through to its own console as the job
writes it (under SLURM it goes to the job's output file). So a training job writes one line to stdout
every ``TrainConfig.progress_every`` seconds, e.g.::

    hnclip train results/runs/synthetic/hnclip/g0.5/f1.0/s0: step 120/500 (24%), epoch 2/10, loss 3.2104,
    41.3 samples/s, 2m41s elapsed, ETA 8m27s

A daemon thread prints them from what the loop last recorded: the phase (loading data, setting up,
training, evaluating, saving) and, while training, the step, epoch and the step's mean loss, all numbers
the loop already holds as Python values (recording them costs no device sync). The thread keeps printing
through a long data load, frozen-margin encoding or per-epoch evaluation, so a job longer than the
interval is never silent for more than about one interval. A job that printed anything ends with a
last line, and so does one stopped by SIGTERM (where it stood: its step, however short the job); one
shorter than the interval that ends otherwise prints nothing. Under torchrun only rank 0 prints.

Every other ``hnclip`` verb a rule runs (fetch, prepare, evaluate, geometry, segments, ...) gets the same
thread without the loop's numbers (:func:`hnclip.cli.main`): ``hnclip evaluate results/evals/...: running,
1m30s elapsed`` every 30 seconds, so no job is silent on the console for long.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time

__all__ = ["Progress", "Terminated", "close_progress_bars", "format_duration", "sigterm_deferred", "stop_on_sigterm"]


class Terminated(SystemExit):
    """The process got SIGTERM (``kill``, a scheduler's time limit or cancel, torchrun stopping its ranks).

    Raised in the main thread by :func:`stop_on_sigterm`'s handler, so the job unwinds as from an error: the
    run lock is released, the progress line says where it stopped, and the verb's last line (its log's, which
    the workflow's ``onerror`` shows) says it was terminated, instead of the half-drawn progress bar a
    default SIGTERM leaves. A ``SystemExit`` (not an ``Exception``): no ``except Exception`` swallows it.
    Exit status 143 (128 + 15), what a shell reports for a process SIGTERM ended.
    """

    def __init__(self):
        super().__init__(128 + signal.SIGTERM)
        # where the job stood (" at step 3/12 after 41s"), set by the innermost Progress it unwinds through
        self.where = ""


# SIGTERMs that arrived inside sigterm_deferred blocks of the main thread, raised when the outermost one ends
_deferral = {"depth": 0, "pending": False}


def _raise_terminated(signum, frame) -> None:
    if _deferral["depth"]:
        _deferral["pending"] = True
        return
    raise Terminated()


@contextlib.contextmanager
def sigterm_deferred():
    """Inside: a SIGTERM waits until the block ends, then raises :class:`Terminated` as usual.

    For writes that must not be cut in two: torch's zip writer interrupted mid-record raises its own
    ``RuntimeError`` from its ``__exit__``, which would replace the ``Terminated`` (exit status 1, not 143,
    and a "failed" job instead of a terminated one). A checkpoint takes well under a second to write, far
    inside a scheduler's grace period between SIGTERM and SIGKILL.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _deferral["depth"] += 1
    try:
        yield
    finally:
        _deferral["depth"] -= 1
        if not _deferral["depth"] and _deferral["pending"]:
            _deferral["pending"] = False
            raise Terminated()


@contextlib.contextmanager
def stop_on_sigterm():
    """Inside: SIGTERM raises :class:`Terminated` in the main thread (elsewhere, and after: as before)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def close_progress_bars() -> None:
    """Close the tqdm bars still open (a job stopping mid-bar), so its next line starts on a line of its own."""
    try:
        from tqdm import tqdm
    except ImportError:
        return
    for bar in list(getattr(tqdm, "_instances", ())):
        bar.close()


def format_duration(seconds: float) -> str:
    """``42s``, ``8m27s``, ``3h05m``."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """One job's progress lines (a context manager: the thread runs inside it).

    ``name``: what each line starts with (``hnclip train <out>``). ``interval``: seconds between lines (0 or
    less: none, and no thread). ``phase``: what the job does until told otherwise. ``stream``: where the
    lines go (default ``sys.stdout``, looked up when printing).
    """

    def __init__(self, name: str, interval: float, phase: str = "starting", stream=None, clock=time.monotonic):
        self.name, self.interval, self.stream, self.clock = name, float(interval), stream, clock
        self.started = clock()
        self.phase = phase
        self.step = self.total_steps = self.epoch = self.epochs = 0
        self.loss = float("nan")
        self.samples_per_step = 0
        self._loop_start: tuple[float, int] | None = None  # (time, step) when this session's loop began
        self.printed = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self.interval > 0

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="hnclip-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind, error, traceback) -> None:
        terminated = kind is not None and issubclass(kind, Terminated)
        if terminated and isinstance(error, Terminated) and not error.where:
            error.where = self.stop_point()  # for the verb's last line in its log (hnclip.cli.main)
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        # a terminated job says where it stopped even when it was shorter than the interval
        if self.printed or terminated:
            self._print(self.final_line(failed=kind is not None, terminated=terminated))

    # ---------------------------------------------------------------------------------- the loop's side
    def set_phase(self, phase: str) -> None:
        self.phase = phase

    def start_loop(self, step: int, total_steps: int, epochs: int, samples_per_step: int) -> None:
        self.step, self.total_steps, self.epochs, self.samples_per_step = step, total_steps, epochs, samples_per_step
        self._loop_start = (self.clock(), step)
        self.phase = "training"

    def record_step(self, step: int, epoch: int, loss: float) -> None:
        """After each optimizer step: plain Python numbers the loop already has."""
        self.step, self.epoch, self.loss = step, epoch, loss
        self.phase = "training"

    # ------------------------------------------------------------------------------------- the lines
    def line(self) -> str:
        now = self.clock()
        elapsed = f"{format_duration(now - self.started)} elapsed"
        head = f"{self.name}: "
        if self._loop_start is None:
            return f"{head}{self.phase}, {elapsed}"
        where = f"step {self.step}/{self.total_steps} ({self.step / max(1, self.total_steps):.0%}), " \
                f"epoch {min(self.epoch, self.epochs)}/{self.epochs}"
        if self.phase != "training":
            return f"{head}{self.phase}, {where}, {elapsed}"
        start_time, start_step = self._loop_start
        done, spent = self.step - start_step, now - start_time
        if done <= 0 or spent <= 0:
            return f"{head}{where}, first step running, {elapsed}"
        rate = done / spent
        eta = (self.total_steps - self.step) / rate
        return (f"{head}{where}, loss {self.loss:.4f}, {rate * self.samples_per_step:.1f} samples/s, {elapsed}, "
                f"ETA {format_duration(eta)}")

    def stop_point(self) -> str:
        """Where the job stands, for a stop: `` at step 3/12 after 41s`` once the loop runs, else the phase
        (`` while loading the training data after 5s``)."""
        took = format_duration(self.clock() - self.started)
        if self._loop_start is not None:
            return f" at step {self.step}/{self.total_steps} after {took}"
        return f" while {self.phase} after {took}"

    def final_line(self, failed: bool = False, terminated: bool = False) -> str:
        took = format_duration(self.clock() - self.started)
        where = f"step {self.step}/{self.total_steps}" if self._loop_start is not None else ""
        if terminated:
            return f"{self.name}: terminated by SIGTERM{' at ' + where if where else ''} after {took}"
        if failed:
            return f"{self.name}: stopped with an error{' at ' + where if where else ''} after {took} " \
                   "(its log has the traceback)"
        return f"{self.name}: finished{', ' + where + ',' if where else ''} in {took}"

    def _print(self, text: str) -> None:
        print(text, file=self.stream or sys.stdout, flush=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._print(self.line())
            self.printed += 1
