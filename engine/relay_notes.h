// The note a relayed INSERT leaves when rows it relayed were received before (Q4M drops them
// silently): q4m-forward counts replays with it and notices a destination ahead of its source.
#pragma once

class THD;
namespace q4m {
class Transaction;
}

namespace q4m_engine {

// The rows the transaction's prepare or one-phase commit dropped (Transaction::replays()), a
// note per table and source, naming the source's record (its last received row) before the
// transaction: a relay compares it with what its source ever had, to tell a replay from a
// record it cannot explain.
void note_replays(THD* thd, const q4m::Transaction& txn);

}  // namespace q4m_engine
