// Backups with mariadb-backup, which copies only the file kinds it knows (not .Q4M). The
// q4m-backup tool (tools/backup) asks the engine, through queue_backup_stage(dir), to copy
// every QUEUE data file into `dir` at the backup's BACKUP STAGE END: MariaDB calls the
// engine's end_backup() there while the backup still blocks DDL and commits (it held BLOCK_COMMIT),
// so the copies are the queues as of the backup point, as InnoDB's copy and the binary log
// position are (with the binary log on every QUEUE change commits through that lock). The tool
// then puts the copies into the backup directory, where --prepare and --copy-back take them.
#pragma once

#include <string>

struct handlerton;

namespace q4m_engine {

// The next BACKUP STAGE END copies the data files into `dir` (which must exist and be
// writable by the server) and writes `dir`/q4m-backup.done listing them.
void stage_next_backup(const std::string& dir);

// Also sets the core's CommitGate: a one-phase QUEUE commit that changes rows takes the
// server's backup commit lock (MDL_BACKUP_COMMIT, as ha_commit_trans() does for a transaction)
// while it is written, so a backup's BLOCK_COMMIT (or FLUSH TABLES WITH READ LOCK) holds it
// back from the point on, as it holds InnoDB's commits; the copies at END are of that point.
void install_backup_hooks(handlerton* hton);
void uninstall_backup_hooks();

}  // namespace q4m_engine
