// With the binary log off MariaDB coordinates a transaction of several engines with its
// tc.log. InnoDB, told the commit order (commit_ordered), then leaves its commit record
// unsynced for that coordinator to recover, but MariaDB 10.11's tc.log recovery commits
// nothing (it rolls back every prepared transaction): a kill -9 just after COMMIT returned
// lost the InnoDB half of an InnoDB + QUEUE transaction (docs/transactions.md). So QUEUE notes
// the other engines at its prepare and, once its own part is committed, syncs their logs
// (handlerton::flush_logs, as FLUSH LOGS does) before the COMMIT returns.
#pragma once
#include <vector>

struct handlerton;
class THD;

namespace q4m_engine {

// The engines other than `self` in thd's transaction (`all`: the whole one, else the statement's).
std::vector<handlerton*> other_participants(THD* thd, bool all, const handlerton* self);

// Syncs their logs, the committed transaction's records with them.
void sync_logs(const std::vector<handlerton*>& engines);

}  // namespace q4m_engine
