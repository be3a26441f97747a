"""A progress line on stderr: redrawn in place on a terminal, a few plain lines in logs."""

import sys
import time


class Progress:
    """Report `done` units of work (optionally out of `total`, then with an ETA) with a rate
    and an optional note (other counts).

    On a terminal the line is redrawn at most 10 times a second; elsewhere (CI logs,
    files) a line is printed at most every `log_interval` seconds, so a long run
    leaves a handful of lines rather than thousands.
    """

    def __init__(
        self,
        label: str,
        unit: str,
        *,
        total: float | None = None,
        scale: float = 1,
        quiet: bool = False,
        log_interval: float = 30.0,
    ) -> None:
        self.label, self.unit, self.total, self.scale = label, unit, total, scale
        self.enabled = not quiet
        self.tty = sys.stderr.isatty()
        self.interval = 0.1 if self.tty else log_interval
        self.start = self.last = time.perf_counter()
        self.done: float = 0
        self.note = ""

    def update(self, done: float, note: str = "") -> None:
        self.done, self.note = done, note
        now = time.perf_counter()
        if self.enabled and now - self.last >= self.interval:
            self.last = now
            self._show(now, end="\r" if self.tty else "\n")

    def close(self, line: str | None = None) -> None:
        """End the display with its last count, or with `line` in its place (what the work found)."""
        if self.enabled and line is not None:
            print(line.ljust(79) if self.tty else line, file=sys.stderr, flush=True)
        elif self.enabled:
            self._show(time.perf_counter(), end="\n")

    def _show(self, now: float, end: str) -> None:
        elapsed = max(now - self.start, 1e-9)
        number = "{:,.1f}" if self.scale != 1 else "{:,.0f}"
        done = self.done / self.scale
        text = f"{self.label}: {number.format(done)} {self.unit}"
        if self.total:
            text += f" / {number.format(self.total / self.scale)} ({100 * self.done / self.total:.0f}%)"
        if self.note:
            text += f", {self.note}"
        text += f", {number.format(done / elapsed)} {self.unit}/s, {elapsed:.1f} s"
        if self.total and 0 < self.done < self.total:
            text += f", ETA {elapsed * (self.total - self.done) / self.done:.0f} s"
        print(text.ljust(79) if self.tty else text, end=end, file=sys.stderr, flush=True)
