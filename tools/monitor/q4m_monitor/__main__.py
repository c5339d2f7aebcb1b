"""python3 -m q4m_monitor [options]: see config.py, or --help."""
import logging
import signal
import sys

import waitress

from . import config
from .sampling import Sampler
from .web import create_app


def main(argv=None):
    logging.basicConfig(level=logging.INFO, format="%(asctime)s q4m-monitor %(levelname)s %(message)s")
    cfg = config.parse(argv)
    sampler = Sampler(cfg)
    sampler.start()
    app = create_app(cfg, sampler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    host = f"[{cfg.listen_host}]" if ":" in cfg.listen_host else cfg.listen_host
    if cfg.allow_remote and not config.is_loopback(cfg.listen_host):
        logging.warning("LISTENING BEYOND LOOPBACK (--allow-remote) on %s:%d: every dashboard login connects to "
                        "MariaDB from this machine and counts as 'user'@'localhost' whatever the browser's "
                        "address, so the accounts' host restrictions do not apply to it; logins with an empty "
                        "password are refused. Put a TLS proxy in front (docs/monitoring.md)", host, cfg.listen_port)
    logging.info("serving http://%s:%d/ (metrics at /metrics), polling every %g s", host, cfg.listen_port,
                 cfg.interval)
    proxy = {}
    if cfg.trusted_proxy:  # its X-Forwarded-Proto (https: Secure cookies) and X-Forwarded-For are believed
        proxy = dict(trusted_proxy=cfg.trusted_proxy, trusted_proxy_count=1,
                     trusted_proxy_headers={"x-forwarded-proto", "x-forwarded-for"}, clear_untrusted_proxy_headers=True)
        logging.info("trusting X-Forwarded-Proto and X-Forwarded-For from %s", cfg.trusted_proxy)
    waitress.serve(app, host=cfg.listen_host, port=cfg.listen_port, threads=4, ident="q4m-monitor",
                   _quiet=True, **proxy)


if __name__ == "__main__":
    main()
