// Status: success or an error with a message fit for a SQL error text
// (it names the file/table and what is wrong).
#pragma once
#include <string>
#include <utility>

namespace q4m {

enum class ErrorCode {
  kOk = 0,
  kNotFound,      // table/file does not exist
  kCorrupt,       // data file damaged (message names file and offset)
  kIo,            // read/write/sync failed (message has errno text)
  kNoSpace,       // ENOSPC / EDQUOT
  kInvalid,       // bad argument
  kNotOwner,      // connection is not in owner mode / does not own the row
  kDropped,       // table was dropped or truncated under us
  kInterrupted,   // a wait was interrupted (KILL)
  kExists,        // create of an existing table
  kLeaseExpired,  // the owned row's lease ran out: it went back to the queue, not removed
  kFull,          // an insert would take the table past its row limit (set_max_rows)
  kMoved,         // the table's rows moved to the table a copying ALTER TABLE built (take_over)
  kRowsMoved,     // the owned rows moved with an ALTER TABLE that could not keep them owned: not removed
  kLocked,        // the data file is open in another process (another server)
  kDamaged,       // a row's bytes read from disk fail their checksum (message names file, row, offset)
  kBlocked,       // the commit waited for a backup that holds commits (CommitGate) too long
};

class Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }
  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

}  // namespace q4m
