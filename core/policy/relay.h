// Relayed rows (queue_set_srcid, q4m-forward): a row relayed from another server carries
// its id there; a row whose id is not newer than the last one received from its source is
// a replay, and is dropped. The last id per source is written in the same chunk as the rows
// (an SRCID record), so a crash keeps both or neither; recovery and compaction keep it.
//
// A transaction's part decides at its prepare, like every admission: its rows' source ids
// count from then on for the rows admitted after it (pending), and its TXN_SRCID records
// (in its prepare's chunk) set the sources' last ids when it commits; a rollback takes them
// back.
#pragma once
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "core/policy/policy.h"

namespace q4m {

class Relay : public PolicyBase {
 public:
  // The sources' last ids, and those of the parts still prepared.
  void opened(RecoveredTable& recovered);
  // Drops the relayed rows received before (b.replays); b.relay_marks: the sources' new last ids.
  bool admit(WriteBatch& b, WriterContext&);
  // The marks (with the record-only ones, WriteBatch::relay_records): SRCID records in the
  // rows' chunk, or TXN_SRCID records in a prepare's, pending until its end.
  void persist(WriteBatch& b, fmt::ChunkBuilder& chunk);
  void committed(const WriteBatch& b) { ended(b); }  // its marks apply
  void withdraw(const WriteBatch& b) { ended(b); }   // its marks go
  void begin_batch(WriterContext&) { saved_.reset(); }
  void written(WriterContext&) { saved_.reset(); }
  void failed(WriterContext&);
  void keep(ReplacementFile& out, bool truncating);  // TRUNCATE keeps them too
  // A copying ALTER TABLE's new table keeps the old one's records (a destination altered
  // while relaying does not take the next rows for replays): the later last id per source.
  void take_over(const Relay& from, fmt::ChunkBuilder& chunk);

  RowId last(uint32_t source) const;  // committed; 0 if none
  const SourceMap& sources() const { return sources_; }

 private:
  // What admission counts: the newest prepared part's mark for the source, else last().
  RowId admitted_last(uint32_t source) const;
  void apply(const fmt::SourceMark& m);
  void ended(const WriteBatch& b);
  void save();  // before the first change of a batch: failed() restores it

  SourceMap sources_;
  std::map<uint64_t, std::vector<fmt::SourceMark>> pending_;  // by prepared part
  struct Saved {
    SourceMap sources;
    std::map<uint64_t, std::vector<fmt::SourceMark>> pending;
  };
  std::unique_ptr<Saved> saved_;
};

}  // namespace q4m
