// ReplacementFile: builds a new data file at "<path>.tmp" (compaction, truncate) and
// installs it: sync, rename over <path>, fsync the directory, reopen <path>.
// Until install() succeeds the old file is untouched; a crash leaves only the .tmp,
// which the next open deletes.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/file/data_file.h"
#include "core/file/format.h"

namespace q4m {

class ReplacementFile {
 public:
  ~ReplacementFile();  // abandons (removes the .tmp) unless installed
  Status create(const std::string& data_path);

  // Records are buffered and written in pieces of at least `flush_bytes`.
  // The payload's file offset. `checksum`: what the row must match (fmt::row_checksum() of
  // its bytes unless they were damaged), written as it is.
  uint64_t add_row(RowId id, uint64_t time_ms, std::string_view payload, uint32_t checksum);
  void add_remove(const std::vector<RowId>& ids) { chunk_.add_remove(ids.data(), ids.size()); }
  void add_srcid(uint32_t source, RowId last) { chunk_.add_srcid(source, last); }
  void add_meta(const fmt::Meta& m) { chunk_.add_meta(m); }
  void add_returns(const std::vector<fmt::ReturnedRow>& rows) { chunk_.add_returns(rows.data(), rows.size()); }
  void add_dedup_key(uint64_t time_ms, std::string_view key) { chunk_.add_dedup_key(time_ms, key); }
  void add_subscribe(uint32_t sub, RowId start, std::string_view name, std::string_view condition) {
    chunk_.add_subscribe(sub, start, name, condition);
  }
  void add_sub_remove(uint32_t sub, const std::vector<RowId>& ids) { chunk_.add_sub_remove(sub, ids.data(), ids.size()); }
  // A prepared part (format.h, TXN_*): its rows (each returns the payload's file offset),
  // removals and prepare. The new file is installed whole, so the records need not share a chunk.
  uint64_t add_txn_row(uint64_t txn, uint64_t time_ms, std::string_view payload, uint32_t checksum) {
    return flushed_ + chunk_.add_txn_row(txn, time_ms, payload, checksum);
  }
  void add_txn_remove(uint64_t txn, const std::vector<RowId>& ids) { chunk_.add_txn_remove(txn, ids.data(), ids.size()); }
  void add_txn_ask(uint64_t txn, const std::vector<RowId>& asked) { chunk_.add_txn_ask(txn, asked.data(), asked.size()); }
  void add_txn_sub_remove(uint64_t txn, uint32_t sub, const std::vector<RowId>& ids) {
    chunk_.add_txn_sub_remove(txn, sub, ids.data(), ids.size());
  }
  void add_txn_prepare(uint64_t txn, std::string_view xid) { chunk_.add_txn_prepare(txn, xid); }
  void add_txn_srcid(uint64_t txn, const fmt::SourceMark& mark) { chunk_.add_txn_srcid(txn, mark); }
  // History (HISTORY_RETENTION): a history row, with its payload; how copied rows ended.
  uint64_t add_history_row(RowId id, uint64_t time_ms, std::string_view payload, uint32_t checksum,
                           const fmt::HistoryEntry& end) {
    return flushed_ + chunk_.add_history_row(id, time_ms, payload, checksum, end);
  }
  void add_history(const std::vector<fmt::HistoryEntry>& ended) { chunk_.add_history(ended.data(), ended.size()); }
  Status flush_if_over(uint64_t flush_bytes);
  // Writes out and fdatasyncs everything added so far, so that install() (run while
  // writers wait) only has to sync what is added after this.
  Status sync_written();

  // Makes the new file the data file. If *fresh is set the rename happened and the
  // caller must switch to it, even when the returned status (directory sync) is an error.
  Status install(std::shared_ptr<DataFile>* fresh);
  uint64_t size() const { return flushed_ + buffer_.size(); }

 private:
  Status flush();
  std::string data_path_, tmp_path_;
  std::shared_ptr<DataFile> tmp_;
  std::string buffer_;
  fmt::ChunkBuilder chunk_{&buffer_};
  uint64_t flushed_ = 0;
  bool installed_ = false;
};

}  // namespace q4m
