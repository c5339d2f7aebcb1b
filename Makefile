# q4m build. `make run` = build + start a local server with the engine; `make test` = all tests.
# The plugin is built for one server version: the installed server's, else the version
# scripts/setup-deps.sh would install (Debian's newest, security updates included).
# `make MARIADB_VERSION=10.11.19 BUILD=build-10.11.19 plugin` builds for another version's SDK.
ifeq ($(origin MARIADB_VERSION),undefined)
MARIADB_VERSION := $(shell bash scripts/mariadb-version.sh)
endif
ifeq ($(strip $(MARIADB_VERSION)),)
$(error cannot tell the MariaDB server version (no mariadb-server-core installed or in apt): set MARIADB_VERSION)
endif
SDK ?= $(HOME)/.cache/q4m/mariadb-$(MARIADB_VERSION)
BUILD ?= build
CXX ?= g++
JOBS ?= 2

# Queue core (core/, cond/): plain C++17, no MariaDB headers (none are on its include path).
# Includes are written from the repository root ("core/table/queue_table.h").
CORE_CXXFLAGS := -std=c++17 -O2 -g -fPIC -Wall -Wextra -pthread -fno-omit-frame-pointer -I.
# The server version's own packaged headers (libmariadbd-dev) come before the source package's,
# which may be an older version's when Debian's archive lacks the newer source (docs/build.md).
SDK_INCLUDES := -I$(SDK)/gen -I$(SDK)/devroot/usr/include/mariadb/server -I$(SDK)/src/include/providers \
  -I$(SDK)/src/include -I$(SDK)/src/sql -I$(SDK)/src/wsrep-lib/include -I$(SDK)/src/wsrep-lib/wsrep-API/v26
# Engine + functions: compiled against the server's own headers; these defines change
# the layout of server structs and must match Debian's build (see docs/build.md).
PLUGIN_CXXFLAGS := -std=gnu++17 -O2 -g -fPIC -fno-omit-frame-pointer -fstack-protector-strong \
  -D_FORTIFY_SOURCE=2 -DHAVE_CONFIG_H -DMYSQL_DYNAMIC_PLUGIN -D_FILE_OFFSET_BITS=64 -DDBUG_OFF -DNDEBUG \
  -Wall -Wno-unused-parameter -I. \
  $(SDK_INCLUDES)
SERVICES_LIB := $(SDK)/devroot/usr/lib/x86_64-linux-gnu/libmysqlservices.a

CORE_SRC := $(wildcard core/*/*.cc cond/*.cc)
CORE_HDR := $(wildcard core/*/*.h cond/*.h)
CORE_OBJ := $(CORE_SRC:%.cc=$(BUILD)/%.o)
PLUGIN_SRC := $(wildcard engine/*.cc functions/*.cc plugin/*.cc)
PLUGIN_HDR := $(wildcard engine/*.h functions/*.h)
PLUGIN_OBJ := $(PLUGIN_SRC:%.cc=$(BUILD)/%.o)
PLUGIN := $(BUILD)/plugin/ha_queue.so

UNIT_SRC := $(wildcard tests/unit/*_test.cc)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.cc=$(BUILD)/tests/%)

TOOL_CXXFLAGS := -std=c++17 -O2 -g -Wall -Wextra -pthread -I. $(shell mariadb_config --cflags 2>/dev/null)
TOOL_LIBS := $(shell mariadb_config --libs 2>/dev/null) -pthread
# The installed tools (q4m-bench, q4m-forward; also in the Debian package) get Debian's hardening.
TOOL_HARDENING := -fstack-protector-strong -D_FORTIFY_SOURCE=2 -Wl,-z,relro -Wl,-z,now
BENCH_SRC := $(wildcard tools/bench/*.cc)
FORWARD_SRC := $(wildcard tools/forward/*.cc)
TOOLS := $(if $(BENCH_SRC),$(BUILD)/bin/q4m-bench) $(if $(FORWARD_SRC),$(BUILD)/bin/q4m-forward)
# Client programs the integration tests drive (binary-protocol consumer, scripted session).
TEST_CLIENTS := $(BUILD)/tests/ps_consumer $(BUILD)/tests/session_client $(BUILD)/tests/db_statement_client

.PHONY: FORCE all deps plugin plugin-cxxflags tools unit-tests test-clients run stop test unit integration bench clean deb
all: plugin tools unit-tests test-clients

# Installs the pinned MariaDB, toolchain and cached server headers (idempotent).
deps:
	@bash scripts/setup-deps.sh >/dev/null

$(SDK)/.complete:
	@bash scripts/setup-deps.sh >/dev/null
	@test -f $@ || { echo "scripts/setup-deps.sh made no SDK for MariaDB $(MARIADB_VERSION) in $(SDK)" >&2; exit 1; }

# Which SDK the plugin objects were compiled against: a new server version (or SDK) rebuilds them.
SDK_STAMP := $(BUILD)/sdk-version
$(SDK_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(MARIADB_VERSION) $(SDK)' | cmp -s - $@ || echo '$(MARIADB_VERSION) $(SDK)' > $@
FORCE:

plugin: $(PLUGIN)
# The flags the plugin is compiled with (tools/struct-probe/probe.sh compiles its probe with them).
plugin-cxxflags:
	@echo '$(PLUGIN_CXXFLAGS)'
tools: $(TOOLS)
unit-tests: $(UNIT_BIN)
test-clients: $(TEST_CLIENTS)

$(BUILD)/core/%.o: core/%.cc $(CORE_HDR)
	@mkdir -p $(dir $@)
	$(CXX) $(CORE_CXXFLAGS) -c $< -o $@
$(BUILD)/cond/%.o: cond/%.cc $(CORE_HDR)
	@mkdir -p $(dir $@)
	$(CXX) $(CORE_CXXFLAGS) -c $< -o $@
$(BUILD)/engine/%.o: engine/%.cc $(PLUGIN_HDR) $(CORE_HDR) $(SDK_STAMP) | $(SDK)/.complete
	@mkdir -p $(dir $@)
	$(CXX) $(PLUGIN_CXXFLAGS) -c $< -o $@
$(BUILD)/functions/%.o: functions/%.cc $(PLUGIN_HDR) $(CORE_HDR) $(SDK_STAMP) | $(SDK)/.complete
	@mkdir -p $(dir $@)
	$(CXX) $(PLUGIN_CXXFLAGS) -c $< -o $@
$(BUILD)/plugin/%.o: plugin/%.cc $(PLUGIN_HDR) $(CORE_HDR) $(SDK_STAMP) | $(SDK)/.complete
	@mkdir -p $(dir $@)
	$(CXX) $(PLUGIN_CXXFLAGS) -c $< -o $@

$(PLUGIN): $(PLUGIN_OBJ) $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CXX) -shared -o $@ $^ -Wl,-z,relro -Wl,-z,now -Wl,--no-undefined-version $(SERVICES_LIB) -pthread

$(BUILD)/tests/%_test: tests/unit/%_test.cc $(CORE_OBJ) $(wildcard tests/unit/*.h) $(CORE_HDR)
	@mkdir -p $(dir $@)
	$(CXX) $(CORE_CXXFLAGS) $< $(CORE_OBJ) -o $@ $(TEST_LDFLAGS)

# The power-loss test routes the core's file system calls through its simulated disk.
$(BUILD)/tests/storage_power_loss_test: TEST_LDFLAGS := \
  -Wl,--wrap=open,--wrap=close,--wrap=pwrite,--wrap=ftruncate,--wrap=fsync,--wrap=fdatasync,--wrap=rename,--wrap=unlink

$(BUILD)/bin/q4m-bench: $(BENCH_SRC) $(wildcard tools/bench/*.h tools/common/*.h)
	@mkdir -p $(dir $@)
	$(CXX) $(TOOL_CXXFLAGS) $(TOOL_HARDENING) $(BENCH_SRC) -o $@ $(TOOL_LIBS)
$(BUILD)/tests/ps_consumer: tests/integration/ps_consumer.cc
	@mkdir -p $(dir $@)
	$(CXX) $(TOOL_CXXFLAGS) $< -o $@ $(TOOL_LIBS)
$(BUILD)/tests/session_client: tests/integration/session_client.cc
	@mkdir -p $(dir $@)
	$(CXX) $(TOOL_CXXFLAGS) $< -o $@ $(TOOL_LIBS)
$(BUILD)/tests/db_statement_client: tests/integration/db_statement_client.cc $(wildcard tools/common/*.h)
	@mkdir -p $(dir $@)
	$(CXX) $(TOOL_CXXFLAGS) -Itools/common $< -o $@ $(TOOL_LIBS)
$(BUILD)/bin/q4m-forward: $(FORWARD_SRC) $(wildcard tools/forward/*.h tools/common/*.h)
	@mkdir -p $(dir $@)
	$(CXX) $(TOOL_CXXFLAGS) $(TOOL_HARDENING) $(FORWARD_SRC) -o $@ $(TOOL_LIBS)

# README command 1: build, then start a local server (./var) with the engine installed.
# Running needs the plugin and the tools (q4m-monitor is Python), not the unit tests.
run: deps
	@$(MAKE) --no-print-directory -j$(JOBS) plugin tools
	@bash scripts/local-server.sh start

stop:
	@bash scripts/local-server.sh stop

# README command 2: every test (unit tests need no server; integration tests start their own).
test: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@bash scripts/run-tests.sh

unit: unit-tests
	@bash scripts/run-tests.sh --unit-only

bench: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@bash scripts/bench.sh $(BENCH_ARGS)

# The Debian package mariadb-plugin-q4m (docs/build.md, "Debian package"): the plugin for the
# installed mariadb-server version, which the package then depends on exactly.
# DEB_VERSION_SUFFIX is appended to the package version (a newer build of the same tree).
MARIADB_DEB_VERSION ?= $(shell dpkg-query -W -f='$${Version}' mariadb-server-core 2>/dev/null)
DEB_DIR ?= $(BUILD)/deb
DEB_VERSION_SUFFIX ?=
DEB_MAINTAINER ?= q4m authors <q4m@users.noreply.github.com>
deb: deps
	@$(MAKE) --no-print-directory -j$(JOBS) plugin tools
	@bash scripts/build-deb.sh "$(DEB_DIR)" "$(MARIADB_DEB_VERSION)" "$(DEB_VERSION_SUFFIX)" "$(DEB_MAINTAINER)"

clean:
	rm -rf $(BUILD)
