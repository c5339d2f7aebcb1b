-- Installs the QUEUE storage engine, its SQL functions (queue_wait, queue_wait_batch,
-- queue_take_dead, queue_end, queue_abort, queue_rowid, queue_delivery_count, queue_renew_lease,
-- queue_set_srcid, queue_compact, queue_stats, queue_release_owned, queue_redrive_dead,
-- queue_purge_dead, queue_allowed, queue_scan_rowid, queue_scan_state, queue_apply_removal,
-- queue_apply_dedup, queue_apply_srcid, queue_apply_redrive, queue_apply_redo, queue_expire,
-- queue_backup_stage)
-- and INFORMATION_SCHEMA.QUEUE_TABLES / QUEUE_OWNED_ROWS / QUEUE_HELD_GROUPS. Copy
-- build/plugin/ha_queue.so into @@plugin_dir first.
-- The plugins are recorded in mysql.plugin and load again at every server start.
INSTALL SONAME 'ha_queue';
