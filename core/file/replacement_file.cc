#include "core/file/replacement_file.h"

#include <cerrno>
#include <cstdio>

namespace q4m {

ReplacementFile::~ReplacementFile() {
  if (tmp_ && !installed_) {
    tmp_.reset();
    remove_file(tmp_path_);
  }
}

Status ReplacementFile::create(const std::string& data_path) {
  data_path_ = data_path;
  tmp_path_ = data_path + ".tmp";
  Status s = remove_file(tmp_path_);  // a leftover of an earlier crash
  if (s.ok()) s = DataFile::create(tmp_path_, &tmp_);
  if (s.ok()) buffer_ = fmt::file_header();
  return s;
}

uint64_t ReplacementFile::add_row(RowId id, uint64_t time_ms, std::string_view payload, uint32_t checksum) {
  return flushed_ + chunk_.add_row(id, time_ms, payload, checksum);
}

Status ReplacementFile::flush() {
  chunk_.finish();
  if (buffer_.empty()) return Status::Ok();
  Status s = tmp_->append(buffer_);
  if (!s.ok()) return s;
  flushed_ += buffer_.size();
  buffer_.clear();
  return Status::Ok();
}

Status ReplacementFile::flush_if_over(uint64_t flush_bytes) {
  return buffer_.size() >= flush_bytes ? flush() : Status::Ok();
}

Status ReplacementFile::sync_written() {
  Status s = flush();
  return s.ok() ? tmp_->sync(SyncMode::kFdatasync) : s;
}

Status ReplacementFile::install(std::shared_ptr<DataFile>* fresh) {
  Status s = flush();
  // Synced whatever the sync mode: the rename must never expose unwritten data.
  if (s.ok()) s = tmp_->sync(SyncMode::kFdatasync);
  if (!s.ok()) return s;
  if (::rename(tmp_path_.c_str(), data_path_.c_str()) != 0) return io_error("rename to " + data_path_, tmp_path_, errno);
  // From here the path names the new file: the caller must switch to it even if the
  // directory sync below fails (it then stops writing, see Status handling there).
  installed_ = true;
  tmp_->set_path_unshared(data_path_);  // same inode, no reopen that could fail
  *fresh = std::move(tmp_);
  return sync_directory_of(data_path_);
}

}  // namespace q4m
