"""The commands' progress line on stderr: one line rewritten in place on a terminal, one summary
line elsewhere.

On a terminal the line is redrawn (``\\r`` and erase to the end of the line) at most every
:data:`ProgressLine.INTERVAL` seconds, and ends with the summary and a newline. When stderr is
not a terminal (a log, a pipe, a CI job) redrawing would write a line per update, so only the
summary is written, once, at the end. What a line may say is the caller's duty: public
quantities only (a file's size and the bytes read so far, a query's position in its spec, a
step of an audit, the time elapsed) — never anything computed from private values.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

__all__ = ["DELAY", "ProgressLine", "lasting", "megabytes", "stderr_is_terminal"]


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (OSError, ValueError, AttributeError):
        return False


class ProgressLine:
    """``show(text)`` while work goes on; ``finish(summary)`` once, at the end."""

    #: Seconds between two redraws of the line on a terminal.
    INTERVAL = 0.1

    def __init__(self, *, terminal: bool | None = None, stream: TextIO | None = None) -> None:
        self.stream = stream
        self.terminal = stderr_is_terminal() if terminal is None else terminal
        self.started = time.monotonic()
        self._drawn = -float("inf")
        self._width = 0
        self._lock = threading.Lock()
        self._done = False

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def show(self, text: str, *, force: bool = False) -> None:
        """Redraw the line with ``text`` (terminal only; throttled unless ``force``)."""
        if not self.terminal:
            return
        with self._lock:
            now = time.monotonic()
            if self._done or (not force and now - self._drawn < self.INTERVAL):
                return
            self._drawn = now
            self._write("\r" + text + "\x1b[K")

    def finish(self, summary: str) -> None:
        """The last word: on a terminal it replaces the line; elsewhere it is the only one."""
        with self._lock:
            if self._done:
                return
            self._done = True
            self._write(
                ("\r" if self.terminal else "")
                + summary
                + ("\x1b[K" if self.terminal else "")
                + "\n"
            )

    def close(self) -> None:
        """Ends a line that was drawn but never finished (the work stopped: an error follows),
        so that what is written next starts on a line of its own."""
        with self._lock:
            if self.terminal and not self._done and self._drawn > -float("inf"):
                self._write("\n")
            self._done = True

    def _write(self, text: str) -> None:
        stream = self.stream if self.stream is not None else sys.stderr
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.write(text)
            stream.flush()


#: Work shorter than this (seconds) shows no progress at all.
DELAY = 2.0


@contextlib.contextmanager
def lasting(label: str) -> Iterator[None]:
    """Progress of work with no steps of its own to count (a calibration, a composition, a
    ledger move), on a terminal only: ``label … 12 s``, redrawn every second once the work has
    lasted :data:`DELAY` seconds, then ``label: done in 12.3 s``. Elsewhere nothing: a line
    that appears or not with the machine's speed would make the command's output irreproducible
    (its result says what was done). Only the time elapsed is shown."""
    line = ProgressLine()
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(1.0 if line.elapsed >= DELAY else DELAY - line.elapsed):
            line.show(f"{label} … {line.elapsed:.0f} s", force=True)

    ticker = threading.Thread(target=tick, daemon=True) if line.terminal else None
    if ticker is not None:
        ticker.start()
    finished = "stopped after"
    try:
        yield
        finished = "done in"
    finally:
        stop.set()
        if ticker is not None:
            ticker.join()
        if line.terminal and line.elapsed >= DELAY:
            line.finish(f"{label}: {finished} {line.elapsed:.1f} s")


def megabytes(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"
