"""How long each stage of a model build took, and the whole build, for the report a build writes."""

from __future__ import annotations

import time


class StageTimes:
    """Made when the build starts; `restart()` when the first stage starts (after set-up that is not a stage),
    `done(name)` when a stage ends (the next one starts there), `report()` the seconds of each and the total."""

    def __init__(self) -> None:
        self._began = self._since = time.monotonic()
        self.seconds: dict[str, float] = {}

    def restart(self) -> None:
        self._since = time.monotonic()

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = round(now - self._since, 1)
        self._since = now

    def report(self) -> dict[str, float]:
        return self.seconds | {"total": round(time.monotonic() - self._began, 1)}
