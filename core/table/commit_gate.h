// What may hold back a one-phase commit that changes a table's rows before it is written: the
// server's backup. MariaDB's BACKUP STAGE BLOCK_COMMIT (and FLUSH TABLES WITH READ LOCK) hold
// every commit back from the backup's point on, and a two-phase commit waits for that inside
// the server; a one-phase commit (autocommit with the binary log off, a consumer's end) is
// written by the table itself, so it passes the gate first. None set: nothing holds commits.
#pragma once
#include "core/util/status.h"

namespace q4m {

class CommitGate {
 public:
  virtual ~CommitGate() = default;
  // Waits until a commit may be written; *pass (maybe null) is handed to leave() once it was.
  // A failure (the wait timed out, or was killed) refuses the commit: nothing is written.
  virtual Status enter(void** pass) = 0;
  virtual void leave(void* pass) = 0;

  static CommitGate* get();
  static void set(CommitGate* gate);  // null: none
};

}  // namespace q4m
