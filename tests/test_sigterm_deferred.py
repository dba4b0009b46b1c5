"""A SIGTERM that lands while a checkpoint is written: the file is finished, then the job stops as terminated.

CI once caught a trainer killed mid-``torch.save``: torch's zip writer, cut off by the ``Terminated`` raised
in its ``write``, raised a ``RuntimeError`` of its own on exit, so the job ended with status 1 (failed)
instead of 143 (terminated), its checkpoint unwritten.
"""

import os
import signal

import pytest
import torch

from hnclip.progress import Terminated, sigterm_deferred, stop_on_sigterm
from hnclip.training import checkpoint as checkpoint_module


def test_a_sigterm_inside_the_block_is_raised_when_it_ends():
    reached = []
    with pytest.raises(Terminated) as stop:
        with stop_on_sigterm():
            with sigterm_deferred():
                with sigterm_deferred():  # nested: only the outermost raises
                    os.kill(os.getpid(), signal.SIGTERM)
                    reached.append("inner")
                reached.append("outer")
            reached.append("after")  # never: the outer block raised
    assert reached == ["inner", "outer"]
    assert stop.value.code == 143
    with stop_on_sigterm():  # nothing left pending: a clean block raises nothing
        with sigterm_deferred():
            pass


class _KilledOnFirstWrite:
    """A file that sends this process SIGTERM as torch writes its first bytes into it."""

    def __init__(self, handle):
        self.handle, self.writes = handle, 0

    def write(self, data):
        self.writes += 1
        if self.writes == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return self.handle.write(data)

    def flush(self):
        return self.handle.flush()


def test_a_checkpoint_written_through_a_sigterm_is_whole_and_the_stop_says_terminated(tmp_path, monkeypatch):
    real_save = torch.save
    monkeypatch.setattr(checkpoint_module.torch, "save", lambda obj, handle: real_save(obj, _KilledOnFirstWrite(handle)))
    payload = {"model": {"weight": torch.arange(50_000, dtype=torch.float64)}, "step": 7}
    path = tmp_path / "last.pt"
    with pytest.raises(Terminated) as stop:
        with stop_on_sigterm():
            checkpoint_module.save_checkpoint(path, payload)
    assert stop.value.code == 143
    monkeypatch.undo()
    loaded = torch.load(path, weights_only=True)
    assert loaded["step"] == 7
    assert torch.equal(loaded["model"]["weight"], torch.arange(50_000, dtype=torch.float64))
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no stray .tmp
