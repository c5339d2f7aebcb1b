// The library's plugins, in one maria_declare_plugin list (one .so, one INSTALL SONAME):
// the QUEUE storage engine (engine/), INFORMATION_SCHEMA.QUEUE_TABLES and QUEUE_OWNED_ROWS,
// and the queue_* SQL functions (functions/). The one place that ties the two together.
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <item_create.h>
#include <mysql/plugin.h>
#include <mysql/plugin_function.h>

#include "engine/handlerton.h"
#include "engine/info_schema.h"
#include "engine/sysvars.h"
#include "functions/function_plugins.h"

namespace {

constexpr unsigned kVersion = 0x0100;
constexpr const char* kVersionText = "1.0";
constexpr const char* kAuthor = "q4m authors";

}  // namespace

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
{
    MYSQL_INFORMATION_SCHEMA_PLUGIN, &queue_held_groups_descriptor, "QUEUE_HELD_GROUPS", kAuthor,
    "Message groups of QUEUE tables holding rows back (GROUP_CONCURRENCY, GROUP_RATE)", PLUGIN_LICENSE_GPL,
    queue_held_groups_init, nullptr, kVersion, nullptr, nullptr, kVersionText, MariaDB_PLUGIN_MATURITY_STABLE},
{
    MYSQL_INFORMATION_SCHEMA_PLUGIN, &queue_subscriptions_descriptor, "QUEUE_SUBSCRIPTIONS", kAuthor,
    "Subscriptions of QUEUE tables, with their lag", PLUGIN_LICENSE_GPL, queue_subscriptions_init, nullptr,
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
    Q4M_FUNCTION(queue_subscribe_plugin, "queue_subscribe",
                 "queue_subscribe(tbl, name [, condition] [, 'oldest'|'newest']): a subscription"),
    Q4M_FUNCTION(queue_unsubscribe_plugin, "queue_unsubscribe", "queue_unsubscribe(tbl, name): drop a subscription"),
    Q4M_FUNCTION(queue_release_owned_plugin, "queue_release_owned",
                 "queue_release_owned(tbl, rowid): give a row another connection owns back to the queue"),
    Q4M_FUNCTION(queue_redrive_dead_plugin, "queue_redrive_dead",
                 "queue_redrive_dead(tbl [, max_rows]): queue dead rows again"),
    Q4M_FUNCTION(queue_purge_dead_plugin, "queue_purge_dead", "queue_purge_dead(tbl [, max_rows]): remove dead rows"),
    Q4M_FUNCTION(queue_allowed_plugin, "queue_allowed",
                 "queue_allowed(tbl, function): may this account call that function on tbl"),
    Q4M_FUNCTION(queue_scan_rowid_plugin, "queue_scan_rowid", "queue_scan_rowid(): id of the row being read"),
    Q4M_FUNCTION(queue_scan_state_plugin, "queue_scan_state", "queue_scan_state(): state of the row being read"),
    Q4M_FUNCTION(queue_scan_history_plugin, "queue_scan_history", "queue_scan_history(): the scan reads history rows"),
    Q4M_FUNCTION(queue_scan_ended_at_plugin, "queue_scan_ended_at", "queue_scan_ended_at(): when the history row ended"),
    Q4M_FUNCTION(queue_scan_deliveries_plugin, "queue_scan_deliveries", "queue_scan_deliveries(): the history row's deliveries"),
    Q4M_FUNCTION(queue_apply_removal_plugin, "queue_apply_removal",
                 "queue_apply_removal(db, tbl, rows): remove rows another server's binary log names"),
    Q4M_FUNCTION(queue_apply_dedup_plugin, "queue_apply_dedup",
                 "queue_apply_dedup(db, tbl, positions): drop new rows another server dropped as duplicates"),
    Q4M_FUNCTION(queue_apply_srcid_plugin, "queue_apply_srcid",
                 "queue_apply_srcid(db, tbl, 'source:last'): record a relay source as another server did"),
    Q4M_FUNCTION(queue_apply_redo_plugin, "queue_apply_redo",
                 "queue_apply_redo(db, tbl, redo): a prepared part's redo, for the crash recovery of the server that logged it"),
    Q4M_FUNCTION(queue_apply_redrive_plugin, "queue_apply_redrive",
                 "queue_apply_redrive(db, tbl, rows): replace dead rows by copies as another server did"),
    Q4M_FUNCTION(queue_apply_subscribe_plugin, "queue_apply_subscribe",
                 "queue_apply_subscribe(db, tbl, name, condition, start): a subscription another server made"),
    Q4M_FUNCTION(queue_apply_unsubscribe_plugin, "queue_apply_unsubscribe",
                 "queue_apply_unsubscribe(db, tbl, name): drop a subscription as another server did"),
    Q4M_FUNCTION(queue_apply_sub_end_plugin, "queue_apply_sub_end",
                 "queue_apply_sub_end(db, tbl, name, ended, removed): a subscription's ends on another server"),
    Q4M_FUNCTION(queue_expire_plugin, "queue_expire",
                 "queue_expire(db, tbl): remove the rows MESSAGE_TTL's expiry claimed, in this transaction"),
    Q4M_FUNCTION(queue_backup_stage_plugin, "queue_backup_stage",
                 "queue_backup_stage(dir): the next BACKUP STAGE END copies the QUEUE data files into dir"),
    Q4M_FUNCTION(queue_receive_plugin, "queue_receive",
                 "queue_receive(tbl, lease [, max_rows [, timeout]]): take rows under receipts"),
    Q4M_FUNCTION(queue_receipt_plugin, "queue_receipt", "queue_receipt(): receipt of the row being read"),
    Q4M_FUNCTION(queue_end_receipt_plugin, "queue_end_receipt", "queue_end_receipt(tbl, receipts): remove them"),
    Q4M_FUNCTION(queue_abort_receipt_plugin, "queue_abort_receipt",
                 "queue_abort_receipt(tbl, receipts [, delay]): give them back"),
    Q4M_FUNCTION(queue_renew_receipt_plugin, "queue_renew_receipt",
                 "queue_renew_receipt(tbl, receipts, lease): extend their leases")
maria_declare_plugin_end;
