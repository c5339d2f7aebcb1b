"""Dashboard sessions: a login is a MariaDB account, checked by connecting with it; its
credentials stay in this process's memory only, under a random session id (an HttpOnly,
SameSite=Strict cookie). Every form carries the session's CSRF token."""
import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field

COOKIE = "q4m_session"
LOGIN_COOKIE = "q4m_login"  # double-submit token of the login form (no session yet)


@dataclass
class Session:
    user: str
    password: str
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    last_used: float = field(default_factory=time.monotonic)
    messages: list = field(default_factory=list)  # (kind, text) shown once on the next page


class Sessions:
    def __init__(self, timeout: float):
        self.timeout = timeout
        self._by_id: dict[str, Session] = {}
        self._lock = threading.Lock()

    def create(self, user: str, password: str) -> tuple[str, Session]:
        sid = secrets.token_urlsafe(32)
        s = Session(user, password)
        with self._lock:
            self._expire()
            self._by_id[sid] = s
        return sid, s

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        with self._lock:
            self._expire()
            s = self._by_id.get(sid)
            if s:
                s.last_used = time.monotonic()
            return s

    def drop(self, sid: str | None):
        with self._lock:
            self._by_id.pop(sid or "", None)

    def _expire(self):
        now = time.monotonic()
        for sid in [k for k, s in self._by_id.items() if now - s.last_used > self.timeout]:
            del self._by_id[sid]


def same_token(a: str | None, b: str | None) -> bool:
    return bool(a) and bool(b) and hmac.compare_digest(a, b)
