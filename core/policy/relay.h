// Relayed rows (queue_set_srcid, q4m-forward): a row relayed from another server carries
// its id there; a row whose id is not newer than the last one received from its source is
// a replay, and is dropped. The last id per source is written in the same chunk as the rows
// (an SRCID record), so a crash keeps both or neither; recovery and compaction keep it.
#pragma once
#include <utility>
#include <vector>

#include "core/policy/policy.h"

namespace q4m {

class Relay : public PolicyBase {
 public:
  void opened(RecoveredTable& recovered) { sources_ = std::move(recovered.sources); }
  // Drops the leading rows received before (b.replayed).
  bool admit(WriteBatch& b, WriterContext&);
  // The source's new last id, in the rows' chunk (unless every row was a replay); or the
  // id a record-only batch names (WriteBatch::relay_record).
  void persist(WriteBatch& b, fmt::ChunkBuilder& chunk);
  void written(WriterContext&) { undo_.clear(); }
  void failed(WriterContext&);
  void keep(ReplacementFile& out, bool truncating);  // TRUNCATE keeps them too
  // A copying ALTER TABLE's new table keeps the old one's records (a destination altered
  // while relaying does not take the next rows for replays): the later last id per source.
  void take_over(const Relay& from, fmt::ChunkBuilder& chunk);

  RowId last(uint32_t source) const;  // 0 if none
  const SourceMap& sources() const { return sources_; }

 private:
  SourceMap sources_;
  std::vector<std::pair<uint32_t, RowId>> undo_;  // this batch's (source, previous last id; 0 = none)
};

}  // namespace q4m
