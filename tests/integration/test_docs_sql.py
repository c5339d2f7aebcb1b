"""The docs' examples run as written: every ```sql block of README.md and docs/*.md runs on a
fresh server with the plugin loaded at startup (as ./q4m.sh run does), with the binary log on
and off, in a database of its own and a connection of its own; a statement that fails fails
the test, naming the file and line.

Markers, an HTML comment on the lines just before a block (invisible in the rendered doc):
  <!-- sql-test: skip (why) -->           the block cannot run alone: a second server, a
                                          template with placeholders. Keep these few.
  <!-- sql-test: setup STATEMENTS -->     statements run first, unseen (the tables a fragment
                                          uses): the block itself stays as the reader sees it.
  <!-- sql-test: error NNNN (why) -->     statements of the block may fail with error NNNN
                                          (and only with it); at least one must.
A statement that blocks longer than STATEMENT_TIMEOUT_S fails (a queue_wait() on an empty
table with the default 60 s timeout: give it a short timeout in the doc, or a row to take).
"""
import re
from pathlib import Path

import pymysql
import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
STATEMENT_TIMEOUT_S = 30
BINLOG_MODES = {"binlog on": ["--log-bin=bin", "--server-id=1", "--binlog-format=ROW"], "binlog off": ["--skip-log-bin"]}
MARKER = re.compile(r"^\s*<!--\s*sql-test:\s*(skip|setup|error)\b(.*?)-->\s*$")


class Block:
    def __init__(self, path, line, sql, markers):
        self.path, self.line, self.sql, self.markers = path, line, sql, markers

    @property
    def name(self):
        return f"{self.path.relative_to(REPO)}:{self.line}"

    def marker(self, kind):
        return [text for k, text in self.markers if k == kind]


def sql_blocks(path):
    """The ```sql blocks of a Markdown file (indented ones too), with the markers just before."""
    lines = path.read_text().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```sql\s*$", lines[i])
        if not fence:
            i += 1
            continue
        indent = len(fence.group(1))
        markers, k = [], i - 1
        while k >= 0 and MARKER.match(lines[k]):
            m = MARKER.match(lines[k])
            markers.append((m.group(1), m.group(2).strip()))
            k -= 1
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith("```"):
            j += 1
        body = "\n".join(line[indent:] if line[:indent].isspace() else line for line in lines[i + 1:j])
        blocks.append(Block(path, i + 1, body, markers))
        i = j + 1
    return blocks


def statements(sql):
    """`sql` split at the semicolons that end statements (not inside quotes or comments),
    comments dropped; each with the line it starts on (from 0)."""
    out, cur, line, start = [], [], 0, None
    i, n, quote = 0, len(sql), None
    while i < n:
        ch = sql[i]
        if quote:
            cur.append(ch)
            if ch == "\\" and quote != "`" and i + 1 < n:
                cur.append(sql[i + 1])
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"`":
            quote = ch
            cur.append(ch)
        elif sql.startswith("--", i) and (i + 2 >= n or sql[i + 2] in " \t\n"):
            while i < n and sql[i] != "\n":
                i += 1
            continue
        elif ch == ";":
            text = "".join(cur).strip()
            if text:
                out.append((start, text))
            cur, start = [], None
            i += 1
            continue
        else:
            cur.append(ch)
        if ch == "\n":
            line += 1
        elif not ch.isspace() and start is None and not quote:
            start = line
        i += 1
    text = "".join(cur).strip()
    if text:
        out.append((start, text))
    return out


BLOCKS = [b for path in DOCS for b in sql_blocks(path)]


@pytest.fixture(params=list(BINLOG_MODES), scope="module")
def docs_server(request, server_factory):
    s = server_factory.new(extra_args=BINLOG_MODES[request.param], at_startup=True)
    assert s.value("SELECT @@log_bin") == (request.param == "binlog on")
    yield s
    s.destroy()


def test_the_docs_have_sql_blocks_and_few_are_skipped():
    assert len(BLOCKS) >= 20, [b.name for b in BLOCKS]
    skipped = [b for b in BLOCKS if b.marker("skip")]
    assert all(reason.startswith("(") for b in skipped for reason in b.marker("skip")), "a skip says why"
    assert len(skipped) <= 6, [b.name for b in skipped]


def test_the_statement_splitter_keeps_quotes_and_drops_comments():
    assert statements("SELECT 'a;b'; -- c; d\nSELECT 2  -- tail\n;") == [(0, "SELECT 'a;b'"), (1, "SELECT 2")]
    assert statements("-- only a comment\n") == []


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_the_docs_sql_runs_as_written(docs_server, block):
    skip = block.marker("skip")
    if skip:
        pytest.skip(f"{block.name}: {skip[0]}")
    allowed = {int(m.group()) for text in block.marker("error") for m in [re.match(r"\d+", text)] if m}
    db = "docs_" + re.sub(r"\W", "_", block.name).lower()
    docs_server.sql(f"DROP DATABASE IF EXISTS `{db}`")
    docs_server.sql(f"CREATE DATABASE `{db}`")
    c = docs_server.connect(db=db, read_timeout=STATEMENT_TIMEOUT_S)
    failed_as_allowed = 0
    try:
        for text in block.marker("setup"):
            for _, stmt in statements(text):
                with c.cursor() as cur:
                    cur.execute(stmt)
                    cur.fetchall()
        for line, stmt in statements(block.sql):
            where = f"{block.name} (line {block.line + 1 + line}): {stmt!r}"
            try:
                with c.cursor() as cur:
                    cur.execute(stmt)
                    cur.fetchall()
            except pymysql.err.OperationalError as e:
                if e.args[0] in (2013,):  # the read timed out
                    pytest.fail(f"{where} did not finish within {STATEMENT_TIMEOUT_S} s", pytrace=False)
                if e.args[0] in allowed:
                    failed_as_allowed += 1
                    continue
                pytest.fail(f"{where} failed: {e}", pytrace=False)
            except pymysql.MySQLError as e:
                if e.args and e.args[0] in allowed:
                    failed_as_allowed += 1
                    continue
                pytest.fail(f"{where} failed: {e}", pytrace=False)
        if allowed:
            assert failed_as_allowed, f"{block.name}: no statement failed with {sorted(allowed)}, as its marker says"
    finally:
        try:
            c.close()
        except pymysql.MySQLError:  # already closed by a timeout
            pass
        # A fresh connection: the block's may have left a session state (owner mode, a
        # transaction, a lock) or died on a timeout.
        docs_server.sql(f"DROP DATABASE IF EXISTS `{db}`")


# ---- the plugins the docs name (issue 40 item 6: they listed 11 functions and 2 I_S tables)
NAME = re.compile(r"\b(queue_[a-z_]+|QUEUE_[A-Z_]+|QUEUE)\b")


def _named_in(text):
    return set(NAME.findall(text))


def _plugin_lists():
    """Where the docs list every plugin of ha_queue.so: name -> the text of that list."""
    api = (REPO / "docs" / "sql-api.md").read_text()
    loading = api[api.index("## Loading"):api.index("\n## ", api.index("## Loading") + 1)]
    build = (REPO / "docs" / "build.md").read_text()
    listing = build[build.index("It lists `QUEUE`"):]
    listing = listing[:listing.index("\n\n")] if "\n\n" in listing else listing
    install = "\n".join(line for line in (REPO / "install.sql").read_text().split("\n") if line.startswith("--"))
    return {"docs/sql-api.md (Loading)": loading, "docs/build.md": listing, "install.sql": install}


def test_the_docs_name_every_plugin_the_server_lists(docs_server):
    plugins = {name: kind for name, kind in docs_server.sql(
        "SELECT PLUGIN_NAME, PLUGIN_TYPE FROM information_schema.PLUGINS WHERE PLUGIN_LIBRARY='ha_queue.so'")}
    assert plugins.get("QUEUE") == "STORAGE ENGINE", plugins
    assert sum(kind == "FUNCTION" for kind in plugins.values()) >= 23, plugins
    assert sum(kind == "INFORMATION SCHEMA" for kind in plugins.values()) >= 3, plugins
    for where, text in _plugin_lists().items():
        named = _named_in(text)
        assert named == set(plugins), (f"{where}: names {sorted(named - set(plugins))} that the server does not "
                                       f"have, misses {sorted(set(plugins) - named)}")
