// Two-phase commit (docs/transactions.md): the handlerton's prepare, recover,
// commit_by_xid and rollback_by_xid. A prepared transaction's parts live in its tables'
// files (TXN_* records, core/file/format.h) and survive the connection (a detached XA
// transaction) and a restart; these hooks find them by xid. After a restart that may have
// left prepared parts (a marker file in the datadir says so), recover() opens every QUEUE
// table of the datadir to find them.
#pragma once

#include <cstdint>
#include <string>

struct handlerton;

namespace q4m_engine {

void install_xa_hooks(handlerton* hton);
// Recovery commits the parts a crash left prepared once the server has decided all of them, in
// the binary log's order (binlog_order.h); if it left some undecided, the first use of a table
// commits the decided ones (cheap when there is nothing to do).
void end_recovered_commits();
// Clean shutdown: the marker goes if no open table holds a prepared part.
void forget_prepared_marker_if_unused();
// The server's own id (my_xid) of the transaction a prepared part's xid names (as the files
// keep it), or 0 for a user's XA transaction.
uint64_t internal_xid(const std::string& key);

}  // namespace q4m_engine
