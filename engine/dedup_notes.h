// The note an INSERT's duplicates (DEDUP_COLUMN) leave: the INSERT succeeds (a producer's
// retry must not fail), so the note is how a client learns that its row was one. Given by the
// statement that decides the drop, the one that commits the transaction: an autocommit INSERT
// is a transaction committed at its own end, so the INSERT itself; in BEGIN ... COMMIT the
// COMMIT; in XA the XA PREPARE or XA COMMIT ... ONE PHASE.
#pragma once

class THD;
namespace q4m {
class Transaction;
}

namespace q4m_engine {

// The new rows the transaction's prepare or one-phase commit dropped as duplicates within the
// window of a table's DEDUP_COLUMN (Transaction::duplicates()), a note per table.
void note_duplicates(THD* thd, const q4m::Transaction& txn);

}  // namespace q4m_engine
