// The note an INSERT's duplicates (DEDUP_COLUMN) leave: the INSERT succeeds (a producer's
// retry must not fail), so the note is how a client learns that its row was one. Given by the
// statement that decides the drop: the INSERT itself when it commits alone without the binary
// log, else the statement that commits the transaction (with the binary log on every
// autocommit INSERT is a statement transaction committed at its own end, so the INSERT too;
// in BEGIN ... COMMIT the COMMIT; in XA the XA PREPARE or XA COMMIT ... ONE PHASE).
#pragma once
#include <cstddef>
#include <string>

class THD;
namespace q4m {
class Transaction;
}

namespace q4m_engine {

// `dropped` rows of `table_label` were not inserted: duplicates within the window of
// DEDUP_COLUMN `column` (`window_s` seconds).
void note_duplicates(THD* thd, const std::string& table_label, size_t dropped, const std::string& column,
                     unsigned long long window_s);
// Those the transaction's prepare or one-phase commit dropped (Transaction::duplicates()).
void note_duplicates(THD* thd, const q4m::Transaction& txn);

}  // namespace q4m_engine
