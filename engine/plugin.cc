// The library's plugins: the QUEUE storage engine, INFORMATION_SCHEMA.QUEUE_TABLES and
// QUEUE_OWNED_ROWS, and the queue_* SQL functions, in one maria_declare_plugin list (one .so, one INSTALL SONAME).
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <handler.h>
#include <mysql/plugin.h>
#include <mysql/plugin_function.h>

#include <string>

#include "../functions/function_plugins.h"
#include "../storage/blocking.h"
#include "../storage/lease.h"
#include "../storage/stats.h"
#include "../storage/table_registry.h"
#include "connection_state.h"
#include "ha_queue.h"
#include "info_schema.h"
#include "plugin.h"
#include "sysvars.h"
#include "table_options.h"

namespace q4m_engine {

handlerton* queue_hton = nullptr;

namespace {

const char* table_file_extensions[] = {".Q4M", NullS};

handler* create_handler(handlerton* hton, TABLE_SHARE* share, MEM_ROOT* mem_root) {
  return new (mem_root) ha_queue(hton, share);
}

int close_connection(handlerton*, THD* thd) {
  destroy_connection_state(thd);  // an owned row goes back to its queue at once
  return 0;
}

// Called by the killer's thread with the victim's LOCK_thd_data held, and only for
// connections whose ha_data is set.
void kill_query(handlerton*, THD* thd, enum thd_kill_levels) {
  if (ConnectionState* s = peek_connection_state(thd)) s->consumer().interrupt();
}

// SHOW ENGINE QUEUE STATUS: one row per global counter (Name = counter, Status = value).
bool show_status(handlerton*, THD* thd, stat_print_fn* print, enum ha_stat_type type) {
  if (type != HA_ENGINE_STATUS) return false;
  for (const auto& [name, value] : q4m::global_stats().snapshot()) {
    std::string v = std::to_string(value);
    if (print(thd, "QUEUE", 5, name.c_str(), name.size(), v.c_str(), v.size())) return true;
  }
  return false;
}

// Thread states (SHOW PROCESSLIST, information_schema.PROCESSLIST.STATE) while q4m sleeps.
constexpr const char* kStateWaitingForRow = "Waiting for a queue row";
constexpr const char* kStateWaitingForCommit = "Waiting for queue group commit";
constexpr const char* kStateSyncing = "Syncing queue data file";

// The core's long sleeps, told to the server for the current thread's THD, so that the
// thread pool (thread_handling=pool-of-threads) runs other connections meanwhile, and
// shown as the thread's state in SHOW PROCESSLIST (else a consumer waiting a minute for a
// row shows the server's last stage, e.g. "checking permissions"). The token is the state
// to restore.
const void* blocking_begin(q4m::BlockingWait what) {
  int type = THD_WAIT_SYNC;
  const char* state = kStateSyncing;
  if (what == q4m::BlockingWait::kRow) {
    type = THD_WAIT_USER_LOCK;
    state = kStateWaitingForRow;
  } else if (what == q4m::BlockingWait::kCommit) {
    type = THD_WAIT_GROUP_COMMIT;
    state = kStateWaitingForCommit;
  }
  THD* thd = current_thd;  // none in a server thread without a connection (shutdown)
  if (!thd) return nullptr;
  const char* before = thd_proc_info(thd, state);
  thd_wait_begin(thd, type);
  return before;
}
void blocking_end(const void* state_before) {
  THD* thd = current_thd;
  if (!thd) return;
  thd_wait_end(thd);
  thd_proc_info(thd, static_cast<const char*>(state_before));
}

int panic(handlerton*, enum ha_panic_function flag) {
  if (flag == HA_PANIC_CLOSE) q4m::TableRegistry::instance().close_all();
  return 0;
}

int engine_init(void* p) {
  handlerton* hton = static_cast<handlerton*>(p);
  queue_hton = hton;
  hton->create = create_handler;
  // No HTON_CAN_RECREATE: TRUNCATE must call handler::truncate(), which keeps the table
  // (and the consumers waiting on it) instead of dropping and re-creating it.
  // Partitioned tables are refused by create(), with a message naming the table.
  hton->flags = 0;
  hton->tablefile_extensions = table_file_extensions;
  hton->close_connection = close_connection;
  hton->kill_query = kill_query;
  hton->show_status = show_status;
  hton->panic = panic;
  hton->table_options = queue_table_options;
  q4m::BlockingHooks hooks;
  hooks.begin = blocking_begin;
  hooks.end = blocking_end;
  q4m::set_blocking_hooks(hooks);
  apply_system_variables();
  return 0;
}

int engine_deinit(void*) {
  q4m::TableRegistry::instance().close_all();
  q4m::LeaseReaper::instance().stop();  // no thread of ours outlives the plugin
  q4m::set_blocking_hooks(q4m::BlockingHooks());
  queue_hton = nullptr;
  return 0;
}

st_mysql_storage_engine engine_descriptor = {MYSQL_HANDLERTON_INTERFACE_VERSION};

constexpr unsigned kVersion = 0x0100;
constexpr const char* kVersionText = "1.0";
constexpr const char* kAuthor = "q4m authors";

}  // namespace

}  // namespace q4m_engine

using namespace q4m_engine;
using namespace q4m_functions;

#define Q4M_FUNCTION(descriptor, name, what)                                              \
  {MariaDB_FUNCTION_PLUGIN, &descriptor, name, kAuthor, what, PLUGIN_LICENSE_GPL, nullptr, \
   nullptr, kVersion, nullptr, nullptr, kVersionText, MariaDB_PLUGIN_MATURITY_STABLE}

maria_declare_plugin(queue){
    MYSQL_STORAGE_ENGINE_PLUGIN, &engine_descriptor, "QUEUE", kAuthor,
    "Q4M message queue storage engine", PLUGIN_LICENSE_GPL, engine_init, engine_deinit,
    kVersion, nullptr, queue_system_variables, kVersionText, MariaDB_PLUGIN_MATURITY_STABLE},
{
    MYSQL_INFORMATION_SCHEMA_PLUGIN, &queue_tables_descriptor, "QUEUE_TABLES", kAuthor,
    "Per-table state of QUEUE tables", PLUGIN_LICENSE_GPL, queue_tables_init, nullptr,
    kVersion, nullptr, nullptr, kVersionText, MariaDB_PLUGIN_MATURITY_STABLE},
{
    MYSQL_INFORMATION_SCHEMA_PLUGIN, &queue_owned_rows_descriptor, "QUEUE_OWNED_ROWS", kAuthor,
    "Rows of QUEUE tables that connections own", PLUGIN_LICENSE_GPL, queue_owned_rows_init, nullptr,
    kVersion, nullptr, nullptr, kVersionText, MariaDB_PLUGIN_MATURITY_STABLE},
    Q4M_FUNCTION(queue_wait_plugin, "queue_wait", "queue_wait(tbl [, tbl ...] [, timeout])"),
    Q4M_FUNCTION(queue_wait_batch_plugin, "queue_wait_batch", "queue_wait_batch(tbl, max_rows [, timeout])"),
    Q4M_FUNCTION(queue_take_dead_plugin, "queue_take_dead", "queue_take_dead(tbl): take a dead row (MAX_DELIVERIES)"),
    Q4M_FUNCTION(queue_end_plugin, "queue_end", "queue_end(): remove the owned row"),
    Q4M_FUNCTION(queue_abort_plugin, "queue_abort", "queue_abort(): return the owned row"),
    Q4M_FUNCTION(queue_rowid_plugin, "queue_rowid", "queue_rowid(): id of the owned row"),
    Q4M_FUNCTION(queue_delivery_count_plugin, "queue_delivery_count",
                 "queue_delivery_count(): how often the owned row has been handed out"),
    Q4M_FUNCTION(queue_renew_lease_plugin, "queue_renew_lease",
                 "queue_renew_lease([seconds]): extend the owned row's lease"),
    Q4M_FUNCTION(queue_set_srcid_plugin, "queue_set_srcid",
                 "queue_set_srcid(source_id, mode, rowid): relay dedup"),
    Q4M_FUNCTION(queue_compact_plugin, "queue_compact", "queue_compact(tbl): compact now"),
    Q4M_FUNCTION(queue_stats_plugin, "queue_stats", "queue_stats(tbl): counters as JSON"),
    Q4M_FUNCTION(queue_release_owned_plugin, "queue_release_owned",
                 "queue_release_owned(tbl, rowid): give a row another connection owns back to the queue"),
    Q4M_FUNCTION(queue_redrive_dead_plugin, "queue_redrive_dead",
                 "queue_redrive_dead(tbl [, max_rows]): queue dead rows again"),
    Q4M_FUNCTION(queue_purge_dead_plugin, "queue_purge_dead", "queue_purge_dead(tbl [, max_rows]): remove dead rows"),
    Q4M_FUNCTION(queue_allowed_plugin, "queue_allowed",
                 "queue_allowed(tbl, function): may this account call that function on tbl"),
    Q4M_FUNCTION(queue_scan_rowid_plugin, "queue_scan_rowid", "queue_scan_rowid(): id of the row being read"),
    Q4M_FUNCTION(queue_scan_state_plugin, "queue_scan_state", "queue_scan_state(): state of the row being read")
maria_declare_plugin_end;
