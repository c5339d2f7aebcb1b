// The binary log's commit order, read back at crash recovery. The server commits the
// transactions a crash left prepared in the order the engine lists them (recover()); QUEUE
// gives a committed part's rows their ids at that moment, and a replica gave them ids in the
// binary log's order. So recovery lists them in that order: by where each one's Xid event
// stands in the newest binary log files. (Measured before this: a primary killed under six
// producers came back with ids that a replica held for other rows, in 1 of 3 runs.)
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>

namespace q4m_engine {

// my_xid -> its rank in the binary log (files and offsets in order), for the Xid events of the
// newest `files` binary log files (an encrypted one too); empty if there is no binary log
// or it cannot be read (the engine's own order stands then).
std::unordered_map<uint64_t, uint64_t> binlog_commit_order(int files = 3);

// The my_xids the binary log committed in earlier server runs: the Xid events of the `files`
// newest files written before this run's first one (the first file of a run is the one whose
// format description has a creation time). False if there is no binary log or a file cannot
// be read.
bool xids_of_earlier_runs(int files, std::unordered_set<uint64_t>* out);

}  // namespace q4m_engine
