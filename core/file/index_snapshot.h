// Index snapshot ("<data path>.idx"): written at a clean close so the next open need
// not read the whole data file. Used only if it matches the data file exactly (size,
// inode, checksum of the file's tail) and is itself intact; the open that uses it
// deletes it before the table can change, so a snapshot never describes a file that
// was written after it. Anything unexpected means: ignore it and recover normally.
//
//   "Q4MINDEX" u32 version u32 0
//   u64 data_size u64 inode u32 crc32c(last <=64 KiB of the data file) u32 0
//   u64 next_rowid u64 rows_inserted u64 rows_removed
//   u32 n_sources { u32 source_id u64 last_rowid }*
//   u64 n_rows { u64 rowid u64 payload_offset u32 length u64 insert_time_ms }*   (the index's hot rows)
//   u64 n_cold { u64 first_payload u64 last_payload u64 first_id u64 last_id u32 slots u32 dense
//                u32 live u64 live_bytes u64 live_bits[(slots + 63) / 64] }*     (version 4: cold blocks,
//                core/row/index.h; merged with the rows in id order when loaded)
//   u64 n_returned { u64 rowid u32 deliveries u64 due_ms }*        (version 2)
//   u64 n_known { u64 rowid u32 checksum }*                        (version 3)
//   u32 crc32c(everything before)
// The n_known entries are the checksums of the live rows with none on disk (KnownChecksums): a
// snapshot of version 1 or 2 (written by a build before row checksums) does not have them,
// so it is not used; the open walks the file instead, which computes them.
#pragma once
#include <string>
#include <vector>

#include "core/file/data_file.h"
#include "core/file/recovery.h"

namespace q4m {

std::string index_snapshot_path(const std::string& data_path);

struct SnapshotSource {
  RowId next_rowid;
  uint64_t rows_inserted, rows_removed;
  const SourceMap* sources;
  const RowIndex* index;
  const std::vector<fmt::ReturnedRow>* returned;  // what RETURN records would say of live rows now
  const KnownChecksums* known_sums;                  // of the rows without a checksum on disk
};

Status write_index_snapshot(const DataFile& file, const SnapshotSource& src);
// True if a valid snapshot matching `file` was loaded into *out.
bool load_index_snapshot(const DataFile& file, RecoveredTable* out);

}  // namespace q4m
