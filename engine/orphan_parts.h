// Prepared parts no recovery will end (issue 40): a statement's two-phase part whose end
// record (TXN_END) the file lost, a torn end of file after a clean shutdown, which runs no
// crash recovery. Such a part held its rows out of every index and kept DROP TABLE refused
// for good. At the first open of its table after startup it is ended as the binary log says:
// committed if the log of an earlier server run has its Xid, rolled back if not. A part the
// binary log cannot decide (no binary log, one unreadable) stays prepared, and DROP TABLE
// drops it with a warning saying what was lost.
#pragma once

#include <string>

namespace q4m {
class QueueTable;
}

namespace q4m_engine {

// The registry's open hook (TableRegistry::set_open_hook): ends `opened`'s orphaned parts.
void end_orphaned_parts(q4m::QueueTable& opened);

// DROP TABLE of the table whose data file is `path`: rolls back its orphaned parts (the
// server's own transactions, which no XA command can end) with a warning naming what is lost,
// so that the drop goes on. Parts of users' XA transactions stay: XA COMMIT / XA ROLLBACK end
// them, and the drop refuses to lose them.
void discard_orphaned_parts_for_drop(const std::string& path);

}  // namespace q4m_engine
