"""The dashboard and /metrics (Flask, served by waitress). Pages read with the logged-in
account's own connection, so each sees only the queues it may SELECT from and may do only
what the server lets it; the plots come from the sampler's ring buffer."""
import ipaddress
import json
import secrets
import time
import urllib.parse

import pymysql
from flask import Flask, Response, abort, g, redirect, render_template, request, url_for
from markupsafe import Markup
from prometheus_client.exposition import choose_encoder

from . import actions, audit, browse, db, metrics, plots
from . import login as login_check
from .auth import COOKIE, LOGIN_COOKIE, Sessions, same_token
from .config import Config
from .sampling import Sampler, ready_rows
from .throttle import Throttle

OVERVIEW_REFRESH_S = 5

# Headers by which a proxy says a request came from elsewhere.
FORWARDING_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Real-IP")

CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")


def create_app(cfg: Config, sampler: Sampler) -> Flask:
    app = Flask(__name__)
    sessions = Sessions(cfg.session_timeout)
    throttle = Throttle(cfg.login_attempts, cfg.login_backoff)
    registry = metrics.registry(sampler, cfg.per_table)

    # ---- plumbing ----------------------------------------------------------
    @app.after_request
    def headers(resp):
        resp.headers["Content-Security-Policy"] = CSP
        resp.headers["X-Frame-Options"] = "DENY"
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Referrer-Policy"] = "no-referrer"
        if request.endpoint not in ("metrics_endpoint", "static"):
            resp.headers["Cache-Control"] = "no-store"
        return resp

    @app.teardown_request
    def close_conn(_exc):
        conn = g.pop("conn", None)
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def session():
        return sessions.get(request.cookies.get(COOKIE))

    def user_conn(s):
        if "conn" not in g:
            g.conn = db.connect(cfg, s.user, s.password)
        return g.conn

    def require_login():
        s = session()
        if s is None:
            abort(redirect(url_for("login", next=request.full_path if request.method == "GET" else "/")))
        return s

    def set_cookie(resp, name, value):
        # Secure when the browser reached us over TLS (directly, or as the trusted proxy says) or when told.
        resp.set_cookie(name, value, httponly=True, samesite="Strict", path="/",
                        secure=cfg.secure_cookies or request.scheme == "https")

    def from_this_machine() -> bool:
        """Whether the browser is surely on this machine: the monitor listens on loopback only and
        the request came straight from a loopback address, through no proxy."""
        if cfg.allow_remote or cfg.trusted_proxy or any(h in request.headers for h in FORWARDING_HEADERS):
            return False
        try:
            return ipaddress.ip_address(request.remote_addr or "").is_loopback
        except ValueError:
            return False

    def require_csrf(s):
        if not same_token(request.form.get("csrf"), s.csrf):
            abort(403, "the form's CSRF token does not match this session: reload the page and try again")

    def render(template, s, **kw):
        messages, s.messages = s.messages, []
        return render_template(template, user=s.user, csrf=s.csrf, messages=messages, **kw)

    @app.errorhandler(pymysql.MySQLError)
    def db_error(e):
        s = session()
        if s is None:
            return Response(actions.error_text(e), status=502, mimetype="text/plain")
        return render("error.html", s, error=actions.error_text(e)), 502

    # ---- metrics -----------------------------------------------------------
    @app.get("/metrics")
    def metrics_endpoint():
        encoder, content_type = choose_encoder(request.headers.get("Accept"))
        return Response(encoder(registry), mimetype=None, content_type=content_type)

    @app.get("/favicon.ico")
    def favicon():
        # Pages link static/favicon.svg; this answers clients that ask the old place anyway.
        return redirect(url_for("static", filename="favicon.svg"), code=301)

    # ---- login -------------------------------------------------------------
    @app.route("/login", methods=["GET", "POST"])
    def login():
        error, status, wait = None, 401, 0.0
        if request.method == "POST":
            if not same_token(request.form.get("csrf"), request.cookies.get(LOGIN_COOKIE)):
                abort(403, "the login form's token does not match: reload the page and try again")
            user, password = request.form.get("user", ""), request.form.get("password", "")
            client = request.remote_addr
            keys = [("client", client), ("account", user)]
            wait = throttle.begin(keys)
            if wait:  # refused before any connection to MariaDB
                status, error = 429, f"too many failed logins: try again in {int(wait) + 1} s"
                audit.record(user, client, "login", "throttled")
            else:
                ok = False
                try:
                    if not password and not from_this_machine():
                        raise login_check.LoginRefused(
                            "an empty password is accepted only from a browser on this machine (the monitor "
                            "listening on loopback, no proxy in between): give the account a password")
                    login_check.check(cfg, user, password)
                    ok = True
                except pymysql.MySQLError as e:
                    error = f"cannot log in as {user!r}: {actions.error_text(e)}"
                except login_check.LoginRefused as e:
                    error = f"cannot log in as {user!r}: {e}"
                finally:
                    throttle.end(keys, ok)
                audit.record(user, client, "login", "ok" if ok else error)
                if ok:
                    sid, _ = sessions.create(user, password)
                    resp = redirect(same_site_path(request.args.get("next", "/")), code=303)
                    set_cookie(resp, COOKIE, sid)
                    resp.delete_cookie(LOGIN_COOKIE, path="/")
                    return resp
        token = secrets.token_urlsafe(32)
        resp = Response(render_template("login.html", csrf=token, error=error, user=None, messages=[]),
                        status=status if error else 200)
        if status == 429:
            resp.headers["Retry-After"] = str(int(wait) + 1)
        set_cookie(resp, LOGIN_COOKIE, token)
        return resp

    @app.post("/logout")
    def logout():
        s = require_login()
        require_csrf(s)
        sessions.drop(request.cookies.get(COOKIE))
        audit.record(s.user, request.remote_addr, "logout", "ok")
        resp = redirect(url_for("login"), code=303)
        resp.delete_cookie(COOKIE, path="/")
        return resp

    # ---- pages -------------------------------------------------------------
    @app.get("/")
    def overview():
        s = require_login()
        conn = user_conn(s)
        visible = db.dict_rows(conn, "SELECT TABLE_SCHEMA, TABLE_NAME, `ROWS`, OWNED_ROWS, DELAYED_ROWS, DEAD_ROWS, "
                                     "WAITERS, HISTORY_ROWS FROM information_schema.QUEUE_TABLES ORDER BY TABLE_SCHEMA, TABLE_NAME")
        latest = sampler.latest()
        now = time.time()
        t0 = sampler.window_start(now)
        queues = []
        for r in visible:
            key = (r["TABLE_SCHEMA"], r["TABLE_NAME"])
            st = latest.tables.get(key) if latest else None
            rate_in, rate_out = sampler.recent_rates(key)
            series = sampler.series(key, t0)
            queues.append(dict(
                schema=key[0], table=key[1],
                ready=max(0, r["ROWS"] - r["OWNED_ROWS"] - r["DELAYED_ROWS"] - r["DEAD_ROWS"]),
                owned=r["OWNED_ROWS"], delayed=r["DELAYED_ROWS"], dead=r["DEAD_ROWS"], waiters=r["WAITERS"],
                history=r["HISTORY_ROWS"],
                oldest_ready_s=(st["oldest_ready_age_ms"] / 1000) if st else None,
                rate_in=rate_in, rate_out=rate_out,
                plot=Markup(plots.line_chart("in / out rows/s", {"in": series["in"], "out": series["out"]},
                                             t0, now, width=360, height=110))))
        return render("overview.html", s, queues=queues, refresh=OVERVIEW_REFRESH_S, sample=latest,
                      interval=cfg.interval)

    def queue_name():
        """The queue a page or action is about: ?schema=...&table=... (a query string carries any
        name, `t:x`, `.`, `a/b` or non-ASCII, where a path segment could not)."""
        schema, table = request.args.get("schema"), request.args.get("table")
        if not schema or not table:
            abort(400, "which queue? expected ?schema=...&table=...")
        return schema, table

    @app.get("/queue/<schema>/<table>")
    def queue_by_path(schema, table):  # the address's older form, for bookmarks
        return redirect(url_for("queue", **{**request.args.to_dict(), "schema": schema, "table": table}), code=308)

    @app.get("/queue")
    def queue():
        schema, table = queue_name()
        s = require_login()
        conn = user_conn(s)
        info = db.dict_rows(conn, "SELECT * FROM information_schema.QUEUE_TABLES WHERE TABLE_SCHEMA=%s "
                                  "AND TABLE_NAME=%s", (schema, table))
        if not info:
            abort(404, f"no QUEUE table {schema}.{table} that this account may see")
        info = info[0]
        stats = db.rows(conn, "SELECT queue_stats(%s)", (db.table_argument(schema, table),))[0][0]
        options = db.rows(conn, "SELECT CREATE_OPTIONS FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s "
                                "AND TABLE_NAME=%s", (schema, table))
        allowed = actions.allowed(conn, schema, table)
        owned = db.dict_rows(
            conn, "SELECT o.ROW_ID, o.CONNECTION_ID, o.DELIVERY_COUNT, o.OWNED_MS, o.ROW_AGE_MS, o.LEASE_LEFT_MS, "
                  "p.USER, p.HOST FROM information_schema.QUEUE_OWNED_ROWS o "
                  "LEFT JOIN information_schema.PROCESSLIST p ON p.ID = o.CONNECTION_ID "
                  "WHERE o.TABLE_SCHEMA=%s AND o.TABLE_NAME=%s ORDER BY o.ROW_ID LIMIT 200", (schema, table))
        for o in owned:  # KILL: any connection with SUPER/CONNECTION ADMIN, else the account's own
            # (connection 0: a row held by a receipt, queue_receive(): no connection to end)
            o["may_kill"] = o["CONNECTION_ID"] != 0 and (allowed["kill"] or o["USER"] == s.user)
        cols = browse.columns(conn, schema, table)
        dead_cols, dead_rows = [], []
        if info["DEAD_ROWS"]:
            dead_cols, dead_rows = browse.page(conn, schema, table, state="dead", limit=20)
        filter_text = request.args.get("filter", "")
        after = request.args.get("after", "0")
        after = int(after) if after.isdigit() else 0
        browse_error, page_cols, page_rows = None, cols, []
        try:
            flt = browse.compile_filter(filter_text, cols) if filter_text.strip() else None
            page_cols, page_rows = browse.page(conn, schema, table, after=after, flt=flt)
        except browse.FilterError as e:
            browse_error = str(e)
        except pymysql.err.MySQLError as e:
            browse_error = actions.error_text(e)
        # History (HISTORY_RETENTION): searched by a column value, a page at a time.
        keeps_history = "HISTORY_RETENTION" in (options[0][0] or "").upper() if options else False
        hfilter_text = request.args.get("hfilter", "")
        hafter = request.args.get("hafter", "0")
        hafter = int(hafter) if hafter.isdigit() else 0
        history_error, history_cols, history_rows = None, cols, []
        if keeps_history or info["HISTORY_ROWS"]:
            try:
                hflt = browse.compile_filter(hfilter_text, cols) if hfilter_text.strip() else None
                history_cols, history_rows = browse.history_page(conn, schema, table, after=hafter, flt=hflt)
            except browse.FilterError as e:
                history_error = str(e)
            except pymysql.err.MySQLError as e:
                history_error = actions.error_text(e)
        now = time.time()
        t0 = sampler.window_start(now)
        series = sampler.series((schema, table), t0)
        depth_plot = plots.line_chart("depth (rows)", {k: series[k] for k in ("ready", "owned", "delayed", "dead")},
                                      t0, now)
        rate_plot = plots.line_chart("in / out (rows/s)", {"in": series["in"], "out": series["out"]}, t0, now)
        refresh = request.args.get("refresh")
        return render("queue.html", s, schema=schema, table=table, info=info,
                      ready=max(0, info["ROWS"] - info["OWNED_ROWS"] - info["DELAYED_ROWS"] - info["DEAD_ROWS"]),
                      stats=json.loads(stats) if stats else {},
                      options=options[0][0] if options else "", allowed=allowed, owned=owned,
                      dead_cols=dead_cols, dead_rows=dead_rows, columns=cols,
                      filter_text=filter_text, after=after, browse_error=browse_error,
                      page_cols=page_cols, page_rows=page_rows, page_size=browse.PAGE_ROWS,
                      keeps_history=keeps_history or bool(info["HISTORY_ROWS"]), hfilter_text=hfilter_text,
                      hafter=hafter, history_error=history_error, history_cols=history_cols,
                      history_rows=history_rows,
                      depth_plot=Markup(depth_plot), rate_plot=Markup(rate_plot),
                      refresh=int(refresh) if refresh and refresh.isdigit() and int(refresh) > 0 else None)

    # ---- actions -----------------------------------------------------------
    def act(action, fn, done, **details):
        schema, table = queue_name()
        s = require_login()
        require_csrf(s)
        try:
            result = fn(user_conn(s), schema, table)
            s.messages.append(("ok", done(result, f"{schema}.{table}")))
        except (pymysql.MySQLError, ValueError) as e:
            s.messages.append(("error", actions.error_text(e) if isinstance(e, pymysql.MySQLError) else str(e)))
        audit.record(s.user, request.remote_addr, action, s.messages[-1][1], schema=schema, table=table, **details)
        return redirect(url_for("queue", schema=schema, table=table), code=303)

    def max_rows_field():
        v = request.form.get("max_rows", "").strip()
        if not v:
            return None
        if not v.isdigit():
            raise ValueError(f"max rows: {v!r} is not a whole number")
        return int(v)

    def whole_number(field, v):
        if not v.isdigit():
            raise ValueError(f"{field}: {v!r} is not a whole number")
        return int(v)

    @app.post("/queue/redrive")
    def redrive():
        max_rows = request.form.get("max_rows", "").strip()
        return act("redrive", lambda c, sc, t: actions.redrive(c, sc, t, max_rows_field()),
                   lambda n, name: f"{n} dead rows of {name} queued again", max_rows=max_rows or "all")

    @app.post("/queue/purge")
    def purge():
        max_rows = request.form.get("max_rows", "").strip()

        def run(c, sc, t):
            if request.form.get("confirm") != "yes":
                raise ValueError("purge: tick the box to confirm that the dead rows are to be removed")
            return actions.purge(c, sc, t, max_rows_field())
        return act("purge", run, lambda n, name: f"{n} dead rows of {name} removed", max_rows=max_rows or "all")

    @app.post("/queue/release")
    def release():
        row_id = request.form.get("row_id", "")
        return act("give_back", lambda c, sc, t: actions.release(c, sc, t, whole_number("row id", row_id)),
                   lambda n, _: f"row {row_id}: {n} rows given back to the queue (the owner's next queue_end() fails)",
                   row_id=row_id)

    @app.post("/queue/kill")
    def kill():
        conn_id = request.form.get("connection_id", "")
        return act("end_connection",
                   lambda c, sc, t: actions.kill_connection(c, whole_number("connection id", conn_id)),
                   lambda _, __: f"connection {conn_id} ended: its rows went back to the queue",
                   connection_id=conn_id)

    return app


def same_site_path(target: str) -> str:
    """`target` if a browser reads it as a path on this site, else "/": no scheme, no host
    (`//x`), no backslash (`/\\x` is `//x` to a browser), nothing a browser drops or rewrites
    (whitespace, control characters) and printable ASCII only (a real path arrives percent-encoded)."""
    if (not target.startswith("/") or target.startswith("//") or "\\" in target
            or any(not 0x21 <= ord(ch) <= 0x7e for ch in target)):
        return "/"
    parts = urllib.parse.urlsplit(target)
    return "/" if parts.scheme or parts.netloc else target
