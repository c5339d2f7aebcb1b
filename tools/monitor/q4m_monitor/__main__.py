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
    logging.info("serving http://%s:%d/ (metrics at /metrics), polling every %g s", host, cfg.listen_port,
                 cfg.interval)
    waitress.serve(app, host=cfg.listen_host, port=cfg.listen_port, threads=4, ident="q4m-monitor",
                   _quiet=True)


if __name__ == "__main__":
    main()
