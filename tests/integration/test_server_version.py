"""The plugin and the server's version (docs/build.md, README "Upgrading the server").

A storage engine is built for one exact server version: the server checks each plugin's
interface version, which for engines, information_schema tables and functions is the server's
MYSQL_VERSION_ID. So the plugin must load into the server it was built for, and a build for
another version must be refused with a clear error, the queue tables staying on disk untouched
until the matching build is loaded again.
"""
import re
import shutil
import struct
import subprocess

import pytest

from sqlcheck import expect_error, query


def _version_id(server):
    """@@version "10.11.19-MariaDB-0+deb12u1" -> 101119 (MYSQL_VERSION_ID)."""
    version = server.value("SELECT @@version")
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    assert m, version
    major, minor, patch = map(int, m.groups())
    return major * 10000 + minor * 100 + patch


def _library_plugins(server):
    return query(server.connect(), "SELECT PLUGIN_NAME, PLUGIN_TYPE, PLUGIN_TYPE_VERSION "
                                   "FROM information_schema.PLUGINS WHERE PLUGIN_LIBRARY='ha_queue.so'")


def _sections(so):
    """(name, file offset, size) of each section of an ELF file."""
    out = subprocess.run(["readelf", "-SW", str(so)], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if m:
            found.append((m.group(1), int(m.group(2), 16), int(m.group(3), 16)))
    return found


def _build_for_other_version(plugin_dir, dest, version_id, other_id):
    """A copy of plugin_dir whose ha_queue.so declares other_id as the server version it was built
    for: every plugin interface version (MYSQL_VERSION_ID << 8, in the descriptors' data and in
    the code that fills the function plugins' descriptors) rewritten, which is all the server
    looks at when it decides whether a library is for it. Returns the count rewritten."""
    shutil.copytree(plugin_dir, dest)
    so = dest / "ha_queue.so"
    data = bytearray(so.read_bytes())
    old, new = struct.pack("<i", version_id << 8), struct.pack("<i", other_id << 8)
    count = 0
    for name, offset, size in _sections(so):
        if name not in (".text", ".data", ".data.rel.ro", ".rodata"):
            continue
        at = data.find(old, offset, offset + size)
        while at != -1:
            data[at:at + 4] = new
            count += 1
            at = data.find(old, at + 4, offset + size)
    so.write_bytes(bytes(data))
    return count


def test_plugin_is_built_for_this_server(server):
    """Every plugin of the library (engine, information_schema tables, functions) declares the
    running server's version: the build took the server's version, not a constant."""
    version_id = _version_id(server)
    plugins = _library_plugins(server)
    types = {t for _, t, _ in plugins}
    assert {"STORAGE ENGINE", "INFORMATION SCHEMA", "FUNCTION"} <= types, plugins
    wrong = [(n, v) for n, _, v in plugins if v != f"{version_id}.0"]
    assert not wrong, f"plugins built for another server than {version_id}: {wrong}"


@pytest.mark.parametrize("other", ["older", "newer"])
def test_build_for_another_server_version_is_refused(server_factory, tmp_path, other):
    """The server upgraded (or downgraded) under a plugin built for its old version: it starts,
    refuses the library with a clear error, QUEUE tables answer "Unknown storage engine" and
    are left untouched on disk; with the matching build back, every row is there."""
    s = server_factory.new(at_startup=True)
    try:
        c = s.connect()
        query(c, "CREATE TABLE q (v INT) ENGINE=QUEUE")
        query(c, "INSERT INTO q VALUES (1),(2),(3)")
        version_id = _version_id(s)
        other_id = version_id - 1 if other == "older" else version_id + 1
        matching_dir = s.plugin_dir
        rewritten = _build_for_other_version(matching_dir, tmp_path / "other", version_id, other_id)
        assert rewritten >= 3, "no plugin interface version found in ha_queue.so"
        s.stop()
        files = {p.name: p.read_bytes() for p in (s.datadir / "test").iterdir() if p.name.startswith("q.")}
        assert any(n != "q.frm" for n in files), files  # the queue's own data file

        s.plugin_dir = tmp_path / "other"
        s.start()
        log = s.err_log_since_start()
        assert ("Can't open shared library 'ha_queue.so' (errno: 8, API version for STORAGE ENGINE plugin "
                "QUEUE not supported by this version of the server)") in log, log[-3000:]
        assert _library_plugins(s) == [], "part of the library loaded into the wrong server"
        c = s.connect()
        expect_error(c, "SELECT v FROM q", "Unknown storage engine 'QUEUE'", code=1286)
        expect_error(c, "INSERT INTO q VALUES (4)", "Unknown storage engine 'QUEUE'", code=1286)
        expect_error(c, "INSTALL SONAME 'ha_queue'", "API version for STORAGE ENGINE plugin QUEUE "
                     "not supported by this version of the server", code=1126)
        s.stop()
        after = {p.name: p.read_bytes() for p in (s.datadir / "test").iterdir() if p.name.startswith("q.")}
        assert after == files, "the refused server changed the queue's files"

        s.plugin_dir = matching_dir
        s.start()
        c = s.connect()
        assert query(c, "SELECT v FROM q WHERE queue_wait('test.q', 0)") == [(1,)]
        assert query(c, "SELECT queue_end()") == [(1,)]
        assert query(c, "SELECT v FROM q ORDER BY v") == [(2,), (3,)]
    finally:
        s.destroy()
