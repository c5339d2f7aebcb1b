"""q4m_worker: producers and workers for q4m, the message queue inside MariaDB.

    from q4m_worker import enqueue, Worker
    enqueue(conn, "jobs", {"body": "..."}, delay=30)
    Worker(connect=..., table="jobs", handler=handle, threads=4).run()

Guarantees: at-least-once by default; exactly-once for the InnoDB rows a handler writes
through job.conn with transactional=True (see clients/python/README.md).
"""
from .backoff import backoff_delay
from .errors import ConfigError, JobAbandoned
from .metrics import prometheus_text
from .producer import (TableOptions, enqueue, enqueue_many, forget_table_options,
                       table_options)
from .processes import run_processes
from .receipts import Received, abort_receipts, end_receipts, receive, renew_receipts
from .worker import HandlerConnection, Job, Worker, exactly_once

__all__ = ["enqueue", "enqueue_many", "table_options", "forget_table_options", "TableOptions",
           "Worker", "Job", "HandlerConnection", "exactly_once", "backoff_delay",
           "prometheus_text", "run_processes", "ConfigError", "JobAbandoned",
           "receive", "end_receipts", "abort_receipts", "renew_receipts", "Received"]
__version__ = "0.1.0"
