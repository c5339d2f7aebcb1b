"""Retry delays for queue_abort(delay): exponential in the delivery count, capped, jittered."""
import random


def backoff_delay(delivery_count, base=1.0, cap=300.0, jitter=0.2, rand=random.random):
    """Seconds before a failed job is handed out again.

    base * 2^(delivery_count - 1), at most cap; jitter (0..1) takes off up to that share at
    random so that jobs that failed together do not all come back together. delivery_count
    is queue_delivery_count(): 1 at the first delivery."""
    if not 0 <= jitter <= 1:
        raise ValueError(f"q4m: backoff jitter must be between 0 and 1, not {jitter!r}")
    n = max(1, int(delivery_count or 1))
    delay = min(float(cap), float(base) * (2.0 ** min(n - 1, 64)))
    return max(0.0, delay * (1.0 - jitter * rand()))
