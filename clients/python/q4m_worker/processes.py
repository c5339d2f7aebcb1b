"""Worker processes: N forked copies of a Worker, each with its own threads and connections.
The parent forwards SIGTERM/SIGINT and waits; each child stops gracefully on its own."""
import multiprocessing
import os
import signal
import sys
import threading


def _child(worker):
    sys.exit(0 if worker.run() else 3)  # 3: some handler was still running at the deadline


def run_processes(worker, processes):
    """Runs worker.run() in `processes` forked children until SIGTERM/SIGINT (or
    worker.request_stop() in the parent); returns True if every child stopped in time.
    Call it before the parent opens connections or starts threads (fork copies neither
    safely). Each child has its own metrics(): export them from the child (e.g. a file or a
    port per process)."""
    ctx = multiprocessing.get_context("fork")
    children = [ctx.Process(target=_child, args=(worker,), name=f"{worker.name}-p{i}")
                for i in range(processes)]
    for c in children:
        c.start()
    stop = threading.Event()
    old = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            old[sig] = signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.wait(0.2) and not worker._stop_requested.is_set():
            if not any(c.is_alive() for c in children):
                break
        for c in children:
            if c.is_alive():
                os.kill(c.pid, signal.SIGTERM)
        for c in children:
            c.join()
        return all(c.exitcode == 0 for c in children)
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
