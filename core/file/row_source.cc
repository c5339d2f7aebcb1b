#include "core/file/row_source.h"

#include <string>

#include "core/file/format.h"

namespace q4m {

Status FileRowSource::rows(uint64_t first_payload, uint64_t last_payload, RowId first, RowId last,
                           std::vector<RowEntry>* out) const {
  auto not_rows = [&](uint64_t at, const char* what) {
    return Status(ErrorCode::kDamaged, "file " + file_->path() + ": " + what + " at offset " + std::to_string(at) +
                                           " (bytes " + std::to_string(first_payload) + " to " + std::to_string(last_payload) +
                                           " should hold ROW records)");
  };
  if (first_payload < fmt::kFileHeaderSize + fmt::kRowHeaderSize || last_payload < first_payload)
    return not_rows(first_payload, "no row can start");
  const uint64_t start = first_payload - fmt::kRowHeaderSize;
  // Up to the last row's header: its payload's length is in there.
  std::string buf;
  Status s = file_->read(start, static_cast<size_t>(last_payload - start), &buf);
  if (!s.ok()) return Status(ErrorCode::kDamaged, s.message());  // (kCorrupt would say the whole table needs a repair)
  const auto* p = reinterpret_cast<const unsigned char*>(buf.data());
  const size_t n = buf.size();
  size_t pos = 0;
  while (pos < n) {
    if (n - pos >= fmt::kChunkHeaderSize && fmt::get_u32(p + pos) == fmt::kChunkMagic) {
      fmt::ChunkHeader h;
      if (!fmt::parse_chunk_header(p + pos, &h).empty()) return not_rows(start + pos, "a damaged chunk header");
      pos += fmt::kChunkHeaderSize;
      continue;
    }
    if (pos + fmt::kRowHeaderSize == n) {  // the last row: its header only
      const unsigned char type = p[pos];
      if (type != fmt::kCheckedRow && type != fmt::kRow) return not_rows(start + pos, "no ROW record");
      RowEntry e;
      e.id = fmt::get_u64(p + pos + 1);
      e.time_ms = fmt::get_u64(p + pos + 9);
      e.length = fmt::get_u32(p + pos + 17);
      e.offset = last_payload;
      if (e.id != last) return not_rows(start + pos, "another row's record");
      out->push_back(e);
      return Status::Ok();
    }
    fmt::RecordReader reader(std::string_view(buf.data() + pos, n - pos));
    fmt::Record r;
    if (!reader.next(&r)) return not_rows(start + pos, "an unreadable record");
    if (r.type == fmt::kRow && r.rowid >= first && r.rowid <= last) {
      RowEntry e;
      e.id = r.rowid;
      e.time_ms = r.time_ms;
      e.length = r.length;
      e.offset = start + pos + r.payload_pos;
      out->push_back(e);
    }
    pos += reader.position();
  }
  return not_rows(last_payload, "no row header");  // the last row's header was not where it should be
}

}  // namespace q4m
