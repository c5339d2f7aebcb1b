// Consistent snapshots of queue tables (START TRANSACTION WITH CONSISTENT SNAPSHOT, which
// mariadb-dump --single-transaction runs): every commit a table queues takes a ticket from
// one counter, in its queue's order; a snapshot's point is the counter's value when it
// begins. The engine begins snapshots while the server holds its commit-order lock, and a
// transaction's commit is queued under the same lock (commit_ordered), so a point splits
// the commits as InnoDB's read view does. While a snapshot is open, each table journals
// what its commits change (SnapshotJournal), so it can give the rows it held at the point.
// Not covered: a copying ALTER TABLE while a snapshot is open (the new table has no journal:
// a snapshot reads it as it is), as InnoDB's read views do not cover DDL either.
#pragma once
#include <cstdint>

namespace q4m {

class Snapshots {
 public:
  static uint64_t ticket();  // a commit queued now (its table's queue lock held)
  static uint64_t begin();   // a new snapshot's point
  static void end(uint64_t point);
  static bool any();         // a snapshot is open
  static uint64_t oldest();  // the oldest open point; UINT64_MAX if none
  static uint64_t newest();  // the newest point begun (maybe ended since); 0 if none
};

}  // namespace q4m
