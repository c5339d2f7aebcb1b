// The QUEUE handlerton: what the server calls on the engine as a whole (handler
// creation, connection end, KILL, SHOW ENGINE QUEUE STATUS, shutdown), and its setup.
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <handler.h>
#include <mysql/plugin.h>

#include <string>

#include "engine/orphan_parts.h"
#include "engine/handlerton.h"

#include "core/table/background_sync.h"
#include "core/table/reaper.h"
#include "core/table/receipts.h"
#include "core/table/registry.h"
#include "core/util/blocking.h"
#include "core/util/stats.h"
#include "engine/connection_state.h"
#include "engine/expiry_session.h"
#include "engine/subscription_binlog.h"
#include "engine/ha_queue.h"
#include "engine/sysvars.h"
#include "engine/table_options.h"
#include "engine/transactions.h"
#include "engine/backup.h"
#include "engine/xa.h"
#include "engine/tc_log_recovery.h"

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
  if (flag == HA_PANIC_CLOSE) {
    forget_prepared_marker_if_unused();
    q4m::Receipts::forget_all();  // their rows back to the queues before the tables close
    q4m::BackgroundSync::instance().stop();
    q4m::TableRegistry::instance().close_all();
  }
  return 0;
}

}  // namespace

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
  hton->pre_shutdown = stop_expiry_session;
  hton->table_options = queue_table_options;
  install_transaction_hooks(hton);
  install_xa_hooks(hton);
  q4m::TableRegistry::instance().set_open_hook(end_orphaned_parts);
  install_backup_hooks(hton);
  q4m::BlockingHooks hooks;
  hooks.begin = blocking_begin;
  hooks.end = blocking_end;
  q4m::set_blocking_hooks(hooks);
  apply_system_variables();
  read_tc_log();
  start_expiry_session();
  install_subscription_binlog();
  return 0;
}

int engine_deinit(void*) {
  forget_prepared_marker_if_unused();
  stop_expiry_session();  // (UNINSTALL PLUGIN: no pre_shutdown came) its connection may be in a statement on a table
  uninstall_backup_hooks();
  q4m::Receipts::forget_all();
  q4m::BackgroundSync::instance().stop();  // before the tables close; no thread of ours outlives the plugin
  q4m::TableRegistry::instance().close_all();
  q4m::Reaper::instance().stop();  // no thread of ours outlives the plugin
  forget_expiry_session();
  uninstall_subscription_binlog();
  q4m::set_blocking_hooks(q4m::BlockingHooks());
  queue_hton = nullptr;
  return 0;
}

st_mysql_storage_engine engine_descriptor = {MYSQL_HANDLERTON_INTERFACE_VERSION};

}  // namespace q4m_engine

