#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <handler.h>
#include <log.h>
#include <mdl.h>

#include "engine/backup.h"

#include <sys/stat.h>

#include <memory>
#include <mutex>

#include "core/file/data_file.h"
#include "core/table/commit_gate.h"
#include "core/table/registry.h"
#include "core/util/guarded.h"
#include "engine/data_files.h"

namespace q4m_engine {

namespace {

q4m::Guarded<std::string> stage_dir;  // empty: no copy asked

// A backup that was not q4m-backup's (plain mariadb-backup, or BACKUP STAGE by hand) copies
// no .Q4M file: its restored QUEUE tables do not open. Nothing else tells its user.
void warn_backup_without_copy() {
  size_t tables = 0;
  std::string first;
  for_each_data_file([&](const std::string& db, const std::string& name, const std::string&) {
    if (tables++ == 0) first = db + "." + name;
    return true;
  });
  if (tables == 0) return;
  sql_print_warning("QUEUE: a backup ran BACKUP STAGE END without q4m-backup: the %zu QUEUE table(s) (%s%s) "
                    "are not in it (mariadb-backup does not copy .Q4M data files), and a server restored from "
                    "it cannot open them. Back QUEUE tables up with tools/backup/q4m-backup (it takes "
                    "mariadb-backup --backup's arguments; docs/replication.md, \"Backup\")",
                    tables, first.c_str(), tables > 1 ? ", ..." : "");
}

// MariaDB calls it at BACKUP STAGE END, before it lets DDL and commits go on.
void end_backup() {
  std::string dir;
  dir.swap(*stage_dir.lock());
  if (dir.empty()) {
    warn_backup_without_copy();
    return;
  }
  std::string manifest, failed;
  for_each_data_file([&](const std::string& db, const std::string& name, const std::string& path) {
    // path is ./<db>/<table>.Q4M in the server's file-name encoding: the same below `dir`.
    const std::string dest = dir + path.substr(1);
    ::mkdir(dest.substr(0, dest.rfind('/')).c_str(), 0750);
    std::shared_ptr<q4m::QueueTable> table;
    q4m::Status s = q4m::TableRegistry::instance().acquire(path, &table);
    if (s.ok()) s = table->copy_data(dest);
    if (s.ok()) {
      manifest += path.substr(2) + "\n";
    } else {
      failed += db + "." + name + ": " + s.message() + "\n";
      sql_print_error("QUEUE: backup copy of %s.%s failed: %s", db.c_str(), name.c_str(), s.message().c_str());
    }
    return true;
  });
  // The tool trusts the copies only if this says all went well.
  q4m::Status s = q4m::write_file_atomically(dir + (failed.empty() ? "/q4m-backup.done" : "/q4m-backup.failed"),
                                             failed.empty() ? manifest : failed, false);
  if (!s.ok()) sql_print_error("QUEUE: backup manifest in %s: %s", dir.c_str(), s.message().c_str());
}

// The backup commit lock around a one-phase commit of a connection's statement. A thread with
// no THD (the table's own timer: expiry with the binary log off) and a statement that holds
// the lock already (its transaction's commit in the server took it) pass as they are.
class BackupCommitGate final : public q4m::CommitGate {
 public:
  q4m::Status enter(void** pass) override {
    *pass = nullptr;
    THD* thd = current_thd;
    if (!thd || thd->backup_commit_lock) return q4m::Status::Ok();
    auto* held = new Held;  // (MDL_request allocates only on a MEM_ROOT)
    MDL_REQUEST_INIT(&held->request, MDL_key::BACKUP, "", "", MDL_BACKUP_COMMIT, MDL_EXPLICIT);
    if (thd->mdl_context.acquire_lock(&held->request, thd->variables.lock_wait_timeout)) {
      delete held;
      const bool killed = thd->killed != NOT_KILLED;
      thd->clear_error();  // the caller raises its own, naming the table
      if (killed) return q4m::Status(q4m::ErrorCode::kInterrupted, "interrupted");
      return q4m::Status(q4m::ErrorCode::kBlocked,
                         "a backup holds commits (BACKUP STAGE BLOCK_COMMIT, or FLUSH TABLES WITH READ LOCK) "
                         "longer than lock_wait_timeout; nothing was changed, retry");
    }
    *pass = held;
    return q4m::Status::Ok();
  }
  void leave(void* pass) override {
    auto* held = static_cast<Held*>(pass);
    if (!held) return;
    current_thd->mdl_context.release_lock(held->request.ticket);
    delete held;
  }

 private:
  struct Held {
    MDL_request request;
  };
};

BackupCommitGate gate;

}  // namespace

void stage_next_backup(const std::string& dir) {
  *stage_dir.lock() = dir;
}

void install_backup_hooks(handlerton* hton) {
  hton->end_backup = end_backup;
  q4m::CommitGate::set(&gate);
}

void uninstall_backup_hooks() { q4m::CommitGate::set(nullptr); }

}  // namespace q4m_engine
