"""The CLI's output when its reader is gone (E4, SIGHUP): a closed pipe (``| head``) or a closed terminal —
writes fail with EPIPE or EIO — stops the printing, never the run being brought to its end."""

from __future__ import annotations

import errno
import io

import pytest

from workbench.cli import output


class Gone(io.StringIO):
    def __init__(self, code: int) -> None:
        super().__init__()
        self.code = code
        self.tries = 0

    def write(self, text: str) -> int:
        self.tries += 1
        raise OSError(self.code, "gone")


@pytest.mark.parametrize("code", [errno.EIO, errno.EPIPE])
def test_a_reader_gone_stops_the_printing_not_the_run(code: int, monkeypatch: pytest.MonkeyPatch) -> None:
    out, err = Gone(code), Gone(code)
    printer = output._Output(False, out=out, err=err)
    printer.line("first")  # does not raise
    printer.line("second")
    assert err.tries == 1  # nothing more is tried once the reader is gone
    monkeypatch.setattr(output.sys, "stderr", Gone(code))
    output._err("an error, with nobody to read it")  # does not raise


def test_another_write_error_is_not_hidden() -> None:
    printer = output._Output(False, out=Gone(errno.ENOSPC), err=Gone(errno.ENOSPC))
    with pytest.raises(OSError):
        printer.line("a full disk is a real error")
