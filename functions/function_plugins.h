// The SQL functions' plugin descriptors (MariaDB_FUNCTION_PLUGIN), listed by
// engine/plugin.cc in the library's one plugin declaration.
#pragma once

class Plugin_function;

namespace q4m_functions {

extern Plugin_function queue_wait_plugin;
extern Plugin_function queue_wait_batch_plugin;
extern Plugin_function queue_take_dead_plugin;
extern Plugin_function queue_end_plugin;
extern Plugin_function queue_abort_plugin;
extern Plugin_function queue_rowid_plugin;
extern Plugin_function queue_renew_lease_plugin;
extern Plugin_function queue_delivery_count_plugin;
extern Plugin_function queue_set_srcid_plugin;
extern Plugin_function queue_compact_plugin;
extern Plugin_function queue_stats_plugin;
extern Plugin_function queue_subscribe_plugin;
extern Plugin_function queue_unsubscribe_plugin;
extern Plugin_function queue_release_owned_plugin;
extern Plugin_function queue_redrive_dead_plugin;
extern Plugin_function queue_purge_dead_plugin;
extern Plugin_function queue_allowed_plugin;
extern Plugin_function queue_scan_rowid_plugin;
extern Plugin_function queue_scan_state_plugin;
extern Plugin_function queue_scan_history_plugin;
extern Plugin_function queue_scan_ended_at_plugin;
extern Plugin_function queue_scan_deliveries_plugin;
extern Plugin_function queue_apply_removal_plugin;
extern Plugin_function queue_apply_dedup_plugin;
extern Plugin_function queue_apply_redo_plugin;
extern Plugin_function queue_apply_srcid_plugin;
extern Plugin_function queue_apply_redrive_plugin;
extern Plugin_function queue_expire_plugin;
extern Plugin_function queue_backup_stage_plugin;
extern Plugin_function queue_receive_plugin;
extern Plugin_function queue_receipt_plugin;
extern Plugin_function queue_end_receipt_plugin;
extern Plugin_function queue_abort_receipt_plugin;
extern Plugin_function queue_renew_receipt_plugin;

}  // namespace q4m_functions
