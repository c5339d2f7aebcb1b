// FileRowSource: reads the rows of a folded (cold) index block back from the data file
// (core/row/index.h). One pread of the block's bytes, then a walk of its records: a chunk
// header is recognised by its magic (no record type starts with that byte) and checked; a
// ROW record gives back its id, insert time, length and payload offset.
#pragma once
#include <memory>

#include "core/file/data_file.h"
#include "core/row/index.h"

namespace q4m {

class FileRowSource : public RowSource {
 public:
  explicit FileRowSource(std::shared_ptr<const DataFile> file) : file_(std::move(file)) {}
  // For a file the caller keeps alive longer than the index uses this source (recovery).
  static std::shared_ptr<const RowSource> borrowing(const DataFile& file) {
    return std::make_shared<FileRowSource>(std::shared_ptr<const DataFile>(&file, [](const DataFile*) {}));
  }
  Status rows(uint64_t first_payload, RowId start_id, uint64_t last_payload, RowId first, RowId last,
            std::vector<RowEntry>* out, uint64_t* end) const override;

 private:
  std::shared_ptr<const DataFile> file_;
};

}  // namespace q4m
