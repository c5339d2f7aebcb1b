"""Running a test with the binary log on and off (issue 40: the integration suite runs with it on
by default, the recommended configuration, and in both modes wherever behaviour can differ).

    from binlog_modes import both_binlog_modes

    @both_binlog_modes
    def test_x(fresh_server, binlog): ...   # runs as test_x[binlog-on] and test_x[binlog-off]

The `binlog` fixture (conftest.py) takes the run's mode, and `server` / `fresh_server` start in
it; a test that makes its own servers passes it on: server_factory.new(binlog=binlog).
"""
import pytest

BINLOG_MODES = [pytest.param(True, id="binlog-on"), pytest.param(False, id="binlog-off")]

both_binlog_modes = pytest.mark.parametrize("binlog", BINLOG_MODES, indirect=True)

# A test whose subject exists only with the binary log off (a removal that skips its sync, a
# plugin installed while the server runs...): its servers start with it off, and the reason says
# why in the test.
binlog_off_only = pytest.mark.parametrize("binlog", [pytest.param(False, id="binlog-off")], indirect=True)
