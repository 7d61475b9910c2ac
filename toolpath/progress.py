"""Progress of a long job, one `Progress` per stage, always on stderr (stdout stays free for `--json`).

A stage has a label, done/total in a unit, a rate, the time left and a current value (a training loss, a score
so far). On a terminal it is one line redrawn in place (a tqdm bar); elsewhere (a log, CI) it writes a line when
the stage starts, at most one every `every` seconds while it runs, and one when it ends, so a slow job never
looks like a hang and a log never gets a line per step. `set_quiet(True)` (the CLI's `-q`) silences every stage.

    with Progress("[2/4] clip", total=400, unit="steps") as stage:
        for step in range(400):
            ...
            stage.update(value=f"loss {loss:.3f}")
        stage.close(f"top-1 {top1:.3f}")

Leaving the `with` on an exception ends the line with "failed", on Ctrl-C with "interrupted", so the last
line says where the job stopped.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TextIO

EVERY_VARIABLE = "TOOLPATH_PROGRESS_SECONDS"  # seconds between lines without a terminal (default 10)
DEFAULT_EVERY = 10.0
_quiet = False


def set_quiet(quiet: bool) -> None:
    """Silence (or not) every stage of this process: the CLI sets it from `-q` for each command."""
    global _quiet
    _quiet = bool(quiet)


def quiet() -> bool:
    return _quiet


def _every() -> float:
    try:
        return max(0.0, float(os.environ.get(EVERY_VARIABLE, DEFAULT_EVERY)))
    except ValueError:
        return DEFAULT_EVERY


def say(text: str, stream: TextIO | None = None) -> None:
    """A one-off line of a job (what it found, where it wrote), beside its stages; silenced by `-q` too."""
    if not _quiet:
        print(f"toolpath: {text}", file=stream or sys.stderr, flush=True)


class Progress:
    """One stage of a long job; `total` 0 when not known yet (`set_total` later); `initial`: what was done before
    this process (a resumed job: counted as done, not in the rate). A unit of "B" counts bytes and is shown scaled
    (KB, MB, GB)."""

    def __init__(self, label: str, total: int = 0, unit: str = "", *, initial: int = 0, stream: TextIO | None = None,
                 every: float | None = None, clock: Callable[[], float] = time.monotonic, tty: bool | None = None):
        self.label, self.total, self.unit = label, total, unit
        self.done, self.initial, self.value = initial, initial, ""
        self.stream = stream or sys.stderr
        self.every = _every() if every is None else every
        self.clock = clock
        self.started = self._written = clock()
        self.closed = False
        self.silent = _quiet
        is_tty = bool(getattr(self.stream, "isatty", lambda: False)()) if tty is None else tty
        self._bar = None
        if self.silent:
            return
        if is_tty:
            from tqdm import tqdm

            self._bar = tqdm(total=total or None, initial=initial, desc=f"toolpath: {label}", unit=unit or "it",
                             file=self.stream,
                             unit_scale=unit == "B", unit_divisor=1024 if unit == "B" else 1000, mininterval=0.5,
                             dynamic_ncols=True, leave=True)
        else:
            self._line(f"{self.label}: {self._amount(total)} to do" if total else self.label)

    # what is shown

    def _amount(self, n: float) -> str:
        from tqdm import tqdm

        if self.unit == "B":
            return tqdm.format_sizeof(n, "B", 1024)
        return f"{n:,.0f}{' ' + self.unit if self.unit else ''}"

    def _fraction(self) -> str:
        if self.unit == "B":
            return f"{self._amount(self.done)}/{self._amount(self.total)}"
        return f"{self.done:,}/{self._amount(self.total)}"

    def _rate(self, elapsed: float) -> str:
        rate = (self.done - self.initial) / elapsed if elapsed > 0 else 0.0
        if self.unit == "B":
            from tqdm import tqdm

            return f"{tqdm.format_sizeof(rate, 'B', 1024)}/s"
        per = self.unit or "items"
        return f"{rate:.2f} {per}/s" if rate >= 0.1 or rate == 0 else f"{1 / rate:.1f} s per {per.rstrip('s')}"

    def status(self) -> str:
        """The stage as one line: done/total (percent), rate, time left, current value."""
        from tqdm import tqdm

        elapsed = self.clock() - self.started
        parts = [f"{self._fraction()} ({100 * self.done / self.total:.0f}%)" if self.total else self._amount(self.done),
                 self._rate(elapsed)]
        if self.total and self.done > self.initial:
            left = (self.total - self.done) * elapsed / (self.done - self.initial)
            parts.append(f"{tqdm.format_interval(left)} left")
        if self.value:
            parts.append(self.value)
        return f"{self.label}: {', '.join(parts)}"

    def _line(self, text: str) -> None:
        self._written = self.clock()
        print(f"toolpath: {text}", file=self.stream, flush=True)

    # what the job calls

    def set_total(self, total: int) -> None:
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def update(self, n: int = 1, value: str | None = None) -> None:
        self.done += n
        if value is not None:
            self.value = value
        if self.silent or self.closed:
            return
        if self._bar is not None:
            if value is not None:
                self._bar.set_postfix_str(value, refresh=False)
            self._bar.update(n)
        elif self.clock() - self._written >= self.every:
            self._line(self.status())

    def close(self, outcome: str = "") -> None:
        """End the stage: its final line says what it did, in how long, and `outcome` (a figure, where it wrote)."""
        if self.closed:
            return
        self.closed = True
        if self.silent:
            return
        from tqdm import tqdm

        took = tqdm.format_interval(self.clock() - self.started)
        if self._bar is not None:
            self._bar.set_postfix_str(", ".join(t for t in (self.value, outcome) if t), refresh=False)
            self._bar.close()
            return
        amount = f"{self._amount(self.done)} in {took}" if self.done else f"in {took}"
        self._line(f"{self.label}: {amount}" + "".join(f", {t}" for t in (self.value, outcome) if t))

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind, *_) -> None:
        if kind is not None and not self.closed:
            self.close("interrupted" if issubclass(kind, KeyboardInterrupt) else "failed")
        self.close()
