// A prepared part's redo (issue 42, step 2; docs/recovery.md, "With the binary log on"). With
// queue_binlog_redo the prepare of a part the binary log coordinates is written without a
// sync of its own; its records, copied byte for byte, go into the transaction's binary log
// cache (engine/binlog_statements.h), which the binary log syncs before the commit. After a
// power cut, recovery appends to the table's file the parts it lacks (redo_parts), before the
// server's recovery lists the prepared parts: they are then committed in the binary log's
// order like any part whose commit record was lost, and their rows get the ids they had.
//
// A part is lacking iff the file it was written to is still the table's file (same inode and
// birth time: a compaction, TRUNCATE or a new table of the same name makes another file,
// which holds every earlier part, synced, or none of it) and no TXN_PREPARE of the same
// transaction number and xid is in the file (the file after a power cut is a prefix of what
// was written: recovery cuts the lost tail). Transaction numbers restart when a table opens
// from an index snapshot, so the xid (which names the server's transaction) goes with it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/file/data_file.h"
#include "core/file/format.h"
#include "core/util/status.h"

namespace q4m {

// In the group-commit leader: the bytes a part's records take in the chunk being built, from
// construction to encode() (right after its TXN_PREPARE).
class RedoCapture {
 public:
  RedoCapture(const fmt::ChunkBuilder& chunk, const std::string& buffer)
      : chunk_(chunk), buffer_(buffer), begin_(buffer.size()), was_open_(chunk.chunk_open()),
        chunks_(chunk.chunks_opened()) {}
  // The redo of part `txn` of the file `file`, or "" if a chunk header fell among its records
  // (a part split across chunks: not redone, synced instead).
  std::string encode(const DataFile::Identity& file, uint64_t txn, std::string_view xid) const;

 private:
  const fmt::ChunkBuilder& chunk_;
  const std::string& buffer_;
  size_t begin_;
  bool was_open_;
  size_t chunks_;
};

struct RedoPart {
  DataFile::Identity file;
  uint64_t txn = 0;
  std::string xid;
  std::string records;  // the part's records as written: TXN_ROW..., TXN_ASK, TXN_SRCID, TXN_REMOVE, TXN_PREPARE
};

std::string encode_redo(const RedoPart& part);
// False (with *error) if `bytes` is not a redo encode_redo() made.
bool decode_redo(std::string_view bytes, RedoPart* part, std::string* error);

// Appends to the data file at `path` the parts of `parts` it lacks (above), in transaction
// order, as one chunk, synced (with the recovery's cut of a lost tail before it). The file
// must not be open in a table. *appended: how many. A file with a valid index snapshot was
// synced at a clean close and not written since: it lacks nothing.
Status redo_parts(const std::string& path, std::vector<RedoPart> parts, size_t* appended);

}  // namespace q4m
