"""When each scripted incident starts and ends, in simulated seconds since start.

Kept apart from what incidents do so the schedule (including repeats of the
whole timeline) is a pure function that tests can check without a cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sandbox.spec import IncidentSpec


@dataclass(frozen=True)
class Action:
    at: float
    spec: IncidentSpec
    starting: bool
    index: int
    cycle: int


class Timeline:
    def __init__(self, incidents: list[IncidentSpec], repeat_every: float | None = None) -> None:
        self.incidents = list(incidents)
        self.repeat_every = repeat_every
        self._fired: set[tuple[int, int, bool]] = set()

    def actions_in_cycle(self, cycle: int) -> list[Action]:
        base = cycle * (self.repeat_every or 0.0)
        out = []
        for i, inc in enumerate(self.incidents):
            out.append(Action(base + inc.at, inc, True, i, cycle))
            if inc.duration is not None:
                out.append(Action(base + inc.at + inc.duration, inc, False, i, cycle))
        return sorted(out, key=lambda a: (a.at, a.starting))

    def due(self, elapsed: float) -> list[Action]:
        """Actions whose time has come and that have not fired yet, in time order (ends first on ties)."""
        cycles = [0]
        if self.repeat_every:
            current = math.floor(elapsed / self.repeat_every)
            cycles = list(range(max(0, current - 1), current + 1))
        out = []
        for cycle in cycles:
            for a in self.actions_in_cycle(cycle):
                key = (a.cycle, a.index, a.starting)
                if a.at <= elapsed and key not in self._fired:
                    self._fired.add(key)
                    out.append(a)
        return sorted(out, key=lambda a: (a.at, a.starting))
