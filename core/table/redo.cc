#include "core/table/redo.h"

#include <algorithm>
#include <set>
#include <utility>

#include "core/file/index_snapshot.h"
#include "core/file/recovery.h"
#include "core/util/crc32c.h"

namespace q4m {

namespace {

constexpr uint32_t kRedoMagic = 0x52344D51u;  // bytes "Q4MR"
constexpr uint32_t kRedoVersion = 1;
// magic, version, inode, birth, txn, xid length
constexpr size_t kRedoHeaderSize = 4 + 4 + 8 + 8 + 8 + 4;

}  // namespace

std::string RedoCapture::encode(const DataFile::Identity& file, uint64_t txn, std::string_view xid) const {
  const size_t opened = chunk_.chunks_opened() - chunks_;
  // The part's first record opened the chunk (its header is at begin_), or it went into the
  // open one; any other chunk opened among its records split it.
  if (opened != (was_open_ ? 0u : 1u)) return std::string();
  const size_t from = begin_ + (was_open_ ? 0 : fmt::kChunkHeaderSize);
  if (from > buffer_.size()) return std::string();
  RedoPart part;
  part.file = file;
  part.txn = txn;
  part.xid.assign(xid);
  part.records.assign(buffer_, from, buffer_.size() - from);
  return encode_redo(part);
}

std::string encode_redo(const RedoPart& part) {
  std::string out;
  out.reserve(kRedoHeaderSize + part.xid.size() + part.records.size());
  fmt::put_u32(&out, kRedoMagic);
  fmt::put_u32(&out, kRedoVersion);
  fmt::put_u64(&out, part.file.inode);
  fmt::put_u64(&out, part.file.birth_ns);
  fmt::put_u64(&out, part.txn);
  fmt::put_u32(&out, static_cast<uint32_t>(part.xid.size()));
  out.append(part.xid);
  out.append(part.records);
  return out;
}

bool decode_redo(std::string_view bytes, RedoPart* part, std::string* error) {
  if (bytes.size() < kRedoHeaderSize || fmt::get_u32(bytes.data()) != kRedoMagic) {
    *error = "not a QUEUE redo record";
    return false;
  }
  const char* p = bytes.data();
  if (fmt::get_u32(p + 4) != kRedoVersion) {
    *error = "redo record version " + std::to_string(fmt::get_u32(p + 4)) + " is not known to this build";
    return false;
  }
  part->file.inode = fmt::get_u64(p + 8);
  part->file.birth_ns = fmt::get_u64(p + 16);
  part->txn = fmt::get_u64(p + 24);
  const uint32_t xid_len = fmt::get_u32(p + 32);
  if (xid_len > bytes.size() - kRedoHeaderSize || xid_len == 0 || part->txn == 0) {
    *error = "redo record is truncated";
    return false;
  }
  part->xid.assign(p + kRedoHeaderSize, xid_len);
  part->records.assign(bytes.substr(kRedoHeaderSize + xid_len));
  if (part->records.empty()) {
    *error = "redo record holds no records";
    return false;
  }
  return true;
}

Status redo_parts(const std::string& path, std::vector<RedoPart> parts, size_t* appended) {
  *appended = 0;
  std::shared_ptr<DataFile> file;
  Status s = DataFile::open(path, &file);
  if (!s.ok()) return s;
  parts.erase(std::remove_if(parts.begin(), parts.end(), [&](const RedoPart& p) { return !(p.file == file->identity()); }),
              parts.end());
  if (parts.empty()) return Status::Ok();
  {
    RecoveredTable snap;
    if (load_index_snapshot(*file, &snap)) return Status::Ok();  // closed cleanly, synced: lacks nothing
  }
  RecoveredTable rec;
  s = recover_table(*file, &rec);  // cuts a lost tail
  if (!s.ok()) return s;
  std::set<std::pair<uint64_t, std::string>> present;
  s = for_each_record(*file, file->size(), [&](const fmt::Record& r, std::string_view body) {
    if (r.type == fmt::kTxnPrepare) present.emplace(r.txn, std::string(body.substr(r.payload_pos, r.length)));
  });
  if (!s.ok()) return s;
  std::sort(parts.begin(), parts.end(), [](const RedoPart& a, const RedoPart& b) { return a.txn < b.txn; });
  std::string body;
  for (const RedoPart& p : parts) {
    if (present.count({p.txn, p.xid})) continue;
    if (!present.emplace(p.txn, p.xid).second) continue;  // the same part twice in the log
    body.append(p.records);
    ++*appended;
  }
  if (body.empty()) return Status::Ok();
  if (body.size() > fmt::kMaxChunkBody)
    return Status(ErrorCode::kInvalid, "file " + path + ": the parts to redo exceed one chunk");
  // The cut is made durable first: the chunk below is unflagged, which says that every byte
  // before it is on disk.
  s = file->sync(SyncMode::kFdatasync);
  if (!s.ok()) return s;
  std::string chunk(fmt::kChunkHeaderSize, '\0');
  fmt::store_u32(&chunk[0], fmt::kChunkMagic);
  fmt::store_u32(&chunk[4], static_cast<uint32_t>(body.size()));
  fmt::store_u32(&chunk[8], crc32c(body));
  fmt::store_u32(&chunk[12], crc32c(chunk.data(), 12));
  chunk.append(body);
  s = file->append(chunk);
  if (s.ok()) s = file->sync(SyncMode::kFdatasync);
  return s;
}

}  // namespace q4m
