"""q4m-monitor shows a table's history (HISTORY_RETENTION): the count per table on the overview,
and on the queue's page the ended rows, searched by a column value. An HTTP client against a
real monitor and server."""
import html
import re
import urllib.parse

from monitor_harness import Client, Monitor
from sqlcheck import wait_until


def _cells(page, table_id):
    """The text of each cell of each body row of <table id=table_id>."""
    body = re.search(rf'<table id="{table_id}">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    return [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def test_the_history_is_shown_and_searched_by_a_column_value(server, tmp_path):
    server.sql("CREATE TABLE test.orders (order_id INT, status VARCHAR(20)) ENGINE=QUEUE HISTORY_RETENTION=3600")
    server.sql("CREATE TABLE test.plain (v INT) ENGINE=QUEUE")
    c = server.connect()
    c.cursor().execute("INSERT INTO orders VALUES (41, 'paid'), (42, 'shipped'), (43, 'new')")
    for _ in range(2):
        with c.cursor() as cur:
            cur.execute("SELECT queue_wait('orders', 0)")
            cur.fetchall()
    with c.cursor() as cur:
        cur.execute("SELECT queue_end()")  # rows 1 and 2 consumed
        cur.execute("DELETE FROM orders WHERE order_id = 43")  # row 3 deleted
    m = Monitor(server, tmp_path)
    try:
        client = Client(m)
        assert client.login("root", "").status == 303
        overview = client.request("/").text
        row = re.search(r'<tr data-queue="test.orders">(.*?)</tr>', overview, re.S).group(1)
        assert re.search(r'<td class="num history">(\d+)</td>', row).group(1) == "3"
        page = client.request("/queue?schema=test&table=orders").text
        assert "3 ended rows kept" in page
        assert [r[:2] + r[4:] for r in _cells(page, "history")] == [
            ["1", "consumed", "41", "paid"], ["2", "consumed", "42", "shipped"], ["3", "deleted", "43", "new"]]
        found = client.request("/queue?" + urllib.parse.urlencode(
            {"schema": "test", "table": "orders", "hfilter": "order_id = 42"})).text
        assert [r[:3] + r[4:] for r in _cells(found, "history")] == [["2", "consumed", "1", "42", "shipped"]]
        bad = client.request("/queue?" + urllib.parse.urlencode(
            {"schema": "test", "table": "orders", "hfilter": "sleep(1)"})).text
        assert 'id="history-error"' in bad
        plain = client.request("/queue?schema=test&table=plain").text
        assert 'id="history"' not in plain  # a table without the option has no history section
        wait_until(lambda: re.search(r'q4m_queue_history_rows\{schema="test",table="orders"\} 3\.0',
                                     m.get("/metrics")[0]), what="the history gauge")
    finally:
        m.stop()
