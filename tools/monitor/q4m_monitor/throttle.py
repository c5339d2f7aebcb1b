"""Throttling failed dashboard logins, per client address and per account, before any
connection to MariaDB is opened: after `free` failures of a key, attempts are refused for a
backoff that doubles with each further failure (up to MAX_BACKOFF_S), and only one attempt
at a time may then be under way. A success clears the keys it names; a key left alone for
FORGET_AFTER_S is forgotten."""
import threading
import time
from dataclasses import dataclass

MAX_BACKOFF_S = 900.0
FORGET_AFTER_S = 3600.0
MAX_KEYS = 100_000  # bounded memory under a flood of addresses


@dataclass
class _Key:
    failures: int = 0
    in_flight: int = 0
    locked_until: float = 0.0
    last_seen: float = 0.0


class Throttle:
    def __init__(self, free: int, backoff: float):
        self.free, self.backoff = free, backoff
        self._keys: dict[tuple, _Key] = {}
        self._lock = threading.Lock()
        self._next_sweep = 0.0

    def begin(self, keys: list[tuple]) -> float:
        """0 if an attempt for these keys may go ahead (then end() must follow), else the
        seconds to wait."""
        now = time.monotonic()
        with self._lock:
            self._forget(now)
            wait = 0.0
            for k in keys:
                e = self._keys.get(k)
                if e is None:
                    continue
                if now < e.locked_until:
                    wait = max(wait, e.locked_until - now)
                elif e.failures and e.failures + e.in_flight > self.free:
                    wait = max(wait, 1.0)  # past the free attempts: one at a time
            if wait:
                return wait
            for k in keys:
                e = self._keys.setdefault(k, _Key())
                e.in_flight += 1
                e.last_seen = now
            return 0.0

    def end(self, keys: list[tuple], ok: bool):
        now = time.monotonic()
        with self._lock:
            for k in keys:
                e = self._keys.get(k)
                if e is None:
                    continue
                e.in_flight = max(0, e.in_flight - 1)
                e.last_seen = now
                if ok:
                    e.failures, e.locked_until = 0, 0.0
                else:
                    e.failures += 1
                    if e.failures >= self.free:
                        e.locked_until = now + min(MAX_BACKOFF_S, self.backoff * 2 ** (e.failures - self.free))
                if not e.failures and not e.in_flight:
                    del self._keys[k]

    def _forget(self, now: float):
        if len(self._keys) < MAX_KEYS and now < self._next_sweep:
            return
        self._next_sweep = now + 60.0
        stale = [k for k, e in self._keys.items()
                 if not e.in_flight and now >= e.locked_until and now - e.last_seen > FORGET_AFTER_S]
        for k in stale:
            del self._keys[k]
        if len(self._keys) >= MAX_KEYS:  # a flood: forget the oldest that are not locked
            idle = sorted((e.last_seen, k) for k, e in self._keys.items()
                          if not e.in_flight and now >= e.locked_until)
            for _, k in idle[:len(self._keys) // 2]:
                del self._keys[k]
