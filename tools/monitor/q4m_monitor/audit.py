"""The audit trail: every login, logout and action of the dashboard, one line each in the
monitor's log (logger q4m-monitor.audit): when (the line's time), who (the account and the
client's address), what (the action, the table, the rows) and how it ended. Names are
written with repr(), so a table or account name cannot forge a line."""
import logging

log = logging.getLogger("q4m-monitor.audit")


def record(user: str | None, client: str | None, action: str, outcome: str, **details):
    parts = [f"user={user!r}", f"client={client or '?'}", f"action={action}"]
    parts += [f"{k}={v!r}" for k, v in details.items()]
    parts.append(f"outcome={outcome!r}")
    log.info("audit: %s", " ".join(parts))
