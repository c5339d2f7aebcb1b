// The note a relayed INSERT leaves when rows it relayed were received before (Q4M drops them
// silently): q4m-forward counts replays with it and notices a destination ahead of its source.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

class THD;
namespace q4m {
class Transaction;
}

namespace q4m_engine {

// `dropped` of `relayed` rows of relay source `source` (ids first to last) were dropped by
// `table_label`, whose record of that source (its last received row) is `recorded` as of the
// statement: a relay compares it with what its source ever had, to tell a replay from a
// record it cannot explain.
void note_replays(THD* thd, const std::string& table_label, uint32_t source, size_t dropped, size_t relayed,
                  uint64_t first, uint64_t last, uint64_t recorded);
// Those the transaction's prepare or one-phase commit dropped (Transaction::replays()).
void note_replays(THD* thd, const q4m::Transaction& txn);

}  // namespace q4m_engine
