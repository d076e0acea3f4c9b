"""Load shapes (locust ``LoadTestShape``), one per scenario; users and duration from
``SFTRAFFIC_LOAD_USERS`` / ``SFTRAFFIC_LOAD_DURATION`` (see :mod:`load.locustfiles.common`).

* :class:`SteadyFleet`: ramp up in 5 s, hold the fleet until the end (``smoke``, ``steady``).
* :class:`RushHour`: 20 % of the fleet, ramping to 100 % (morning peak) over 40 % of the run,
  holding 20 %, and back down: the daily profile squeezed into the run.
* :class:`BurstAfterFailure`: 30 % steady; at one third of the run the whole fleet (100 %)
  arrives at once, as devices reconnect and flush their backlog after a broker failure (``sftraffic
  load burst`` also stops the store it started for a few seconds just before); back to 30 % for
  the last third.
"""

from __future__ import annotations

from locust import LoadTestShape

from load.locustfiles.common import DURATION, USERS


def _users(fraction: float) -> int:
    return max(3, round(USERS * fraction))  # 3: the fixed consumer and dashboard users


class SteadyFleet(LoadTestShape):
    def tick(self) -> tuple[int, float] | None:
        if self.get_run_time() >= DURATION:
            return None
        return USERS, max(1.0, USERS / 5)


class RushHour(LoadTestShape):
    def tick(self) -> tuple[int, float] | None:
        t = self.get_run_time() / DURATION
        if t >= 1.0:
            return None
        if t < 0.4:
            share = 0.2 + 0.8 * t / 0.4
        elif t < 0.6:
            share = 1.0
        else:
            share = 1.0 - 0.8 * (t - 0.6) / 0.4
        return _users(share), max(1.0, USERS / 10)


class BurstAfterFailure(LoadTestShape):
    def tick(self) -> tuple[int, float] | None:
        t = self.get_run_time() / DURATION
        if t >= 1.0:
            return None
        if 1 / 3 <= t < 2 / 3:
            return _users(1.0), float(USERS)  # everyone at once
        return _users(0.3), max(1.0, USERS / 5)
