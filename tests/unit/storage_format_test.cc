// Encoding level: CRC32C and the chunk/record format.
#include <cstring>

#include "core/util/crc32c.h"
#include "core/file/format.h"
#include "check.h"

using namespace q4m;

TEST(crc32c_known_vectors) {
  CHECK_EQ(crc32c("123456789", 9), 0xE3069283u);  // the standard check value
  CHECK_EQ(crc32c("", 0), 0u);
  std::string zeros(32, '\0');
  CHECK_EQ(crc32c(zeros), 0x8A9136AAu);  // RFC 3720 B.4
  std::string ones(32, '\xff');
  CHECK_EQ(crc32c(ones), 0x62A8AB43u);
}

// The dispatched CRC (the SSE4.2 instruction on x86-64) and the table-driven one agree
// for every length and alignment: files written by either read back with the other.
TEST(crc32c_hardware_equals_portable) {
  std::string s;
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 4096; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    s.push_back(static_cast<char>(x));
  }
  for (size_t start = 0; start < 9; start++)
    for (size_t len = 0; len + start <= s.size(); len += (len < 64 ? 1 : 61)) {
      CHECK_EQ(crc32c(s.data() + start, len), crc32c_extend_portable(0, s.data() + start, len));
      CHECK_EQ(crc32c_extend(0x12345678u, s.data() + start, len),
               crc32c_extend_portable(0x12345678u, s.data() + start, len));
    }
  CHECK_EQ(crc32c_extend_portable(0, "123456789", 9), 0xE3069283u);
}

TEST(crc32c_extend_equals_whole) {
  std::string s;
  for (int i = 0; i < 1000; i++) s.push_back(static_cast<char>(i * 7));
  for (size_t cut : {0u, 1u, 7u, 8u, 9u, 500u, 999u, 1000u}) {
    uint32_t part = crc32c_extend(crc32c(s.data(), cut), s.data() + cut, s.size() - cut);
    CHECK_EQ(part, crc32c(s));
  }
}

TEST(file_header_round_trip) {
  std::string h = fmt::file_header();
  CHECK_EQ(h.size(), fmt::kFileHeaderSize);
  CHECK(fmt::check_file_header(h).empty());
  h[9] ^= 1;
  CHECK(!fmt::check_file_header(h).empty());
}

TEST(chunk_records_round_trip) {
  std::string buf;
  fmt::ChunkBuilder b(&buf);
  fmt::Meta m;
  m.next_rowid = 77;
  m.rows_inserted = 5;
  m.rows_removed = 3;
  b.add_meta(m);
  size_t p1 = b.add_row(10, 1234, "hello");
  RowId ids[] = {3, 4, 5};
  b.add_remove(ids, 3);
  b.add_srcid(9, 4444);
  b.finish();
  CHECK_EQ(buf.substr(p1, 5), "hello");
  fmt::ChunkHeader h;
  REQUIRE(fmt::parse_chunk_header(reinterpret_cast<const unsigned char*>(buf.data()), &h).empty());
  REQUIRE(h.body_len == buf.size() - fmt::kChunkHeaderSize);
  std::string_view body(buf.data() + fmt::kChunkHeaderSize, h.body_len);
  CHECK_EQ(crc32c(body.data(), body.size()), h.body_crc);
  fmt::RecordReader rr(body);
  fmt::Record r;
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kMeta);
  CHECK_EQ(r.meta.next_rowid, 77u);
  CHECK_EQ(r.meta.rows_removed, 3u);
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kRow);
  CHECK_EQ(r.rowid, 10u);
  CHECK_EQ(r.time_ms, 1234u);
  CHECK_EQ(body.substr(r.payload_pos, r.length), "hello");
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kRemove);
  CHECK_EQ(r.count, 3u);
  CHECK_EQ(rr.removed_id(r, 2), 5u);
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kSrcId);
  CHECK_EQ(r.source_id, 9u);
  CHECK_EQ(r.last_rowid, 4444u);
  CHECK(!rr.next(&r));
  CHECK(rr.error().empty());
}

TEST(malformed_record_is_reported) {
  std::string body("\x01\x02\x03", 3);  // a ROW record cut short
  fmt::RecordReader rr(body);
  fmt::Record r;
  CHECK(!rr.next(&r));
  CHECK(!rr.error().empty());
  std::string unknown("\x63", 1);
  fmt::RecordReader rr2(unknown);
  CHECK(!rr2.next(&r));
  CHECK(rr2.error().find("unknown record type") != std::string::npos);
}

TEST(chunk_header_damage_detected) {
  std::string buf;
  fmt::ChunkBuilder b(&buf);
  b.add_row(1, 1, "x");
  b.finish();
  for (size_t i = 0; i < fmt::kChunkHeaderSize; i++) {
    std::string bad = buf;
    bad[i] ^= 0x10;
    fmt::ChunkHeader h;
    CHECK(!fmt::parse_chunk_header(reinterpret_cast<const unsigned char*>(bad.data()), &h).empty());
  }
}

// Bit 31 of the length field flags a chunk no sync followed (sync mode none); the body
// length and checksum are unaffected, and the flag is covered by the header checksum.
TEST(unsynced_flag_round_trips_and_is_checksummed) {
  for (bool unsynced : {false, true}) {
    std::string buf;
    fmt::ChunkBuilder b(&buf, unsynced);
    b.add_row(5, 6, "payload");
    b.finish();
    fmt::ChunkHeader h;
    REQUIRE(fmt::parse_chunk_header(reinterpret_cast<const unsigned char*>(buf.data()), &h).empty());
    CHECK_EQ(h.unsynced, unsynced);
    CHECK_EQ(h.body_len, buf.size() - fmt::kChunkHeaderSize);
    std::string flipped = buf;
    flipped[7] ^= static_cast<char>(0x80);  // the flag bit alone
    CHECK(!fmt::parse_chunk_header(reinterpret_cast<const unsigned char*>(flipped.data()), &h).empty());
  }
}

// Versions 1 (no unsynced flag), 2 (no RETURN records), 3 (no DEDUP_KEY records), 4 (no
// row checksums), 5 (no transaction records), 6 (no TXN_SRCID), 7 (no ID_FLOOR, TXN_ASK) and
// 8 (no HISTORY, HISTORY_ROW, SUBSCRIBE, UNSUBSCRIBE, SUB_REMOVE) and 9 (no TXN_SUB_REMOVE) are still
// read; newer versions are refused by name.
TEST(file_header_versions) {
  std::string h = fmt::file_header();
  CHECK_EQ(fmt::get_u32(h.data() + 8), 10u);
  CHECK(fmt::check_file_header(h).empty());
  for (uint32_t v : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u, 11u}) {
    std::string o(fmt::kFileMagic, sizeof(fmt::kFileMagic));
    fmt::put_u32(&o, v);
    fmt::put_u32(&o, crc32c(o));
    std::string why = fmt::check_file_header(o);
    if (v < 11) CHECK(why.empty());
    else CHECK(why.find("unsupported format version 11 (this build reads 1 to 10)") != std::string::npos);
  }
}

// The subscription records round-trip among others (core/table/subscriptions.h).
TEST(subscription_records_round_trip) {
  std::string buf;
  fmt::ChunkBuilder b(&buf);
  b.add_subscribe(3, 42, "billing", "kind = 'order'");
  b.add_subscribe(4, 1, "all", "");
  const RowId ids[] = {5, 9, 0x123456789ull};
  b.add_sub_remove(3, ids, 3);
  b.add_remove(ids, 1);
  b.add_unsubscribe(4);
  b.finish();
  std::string_view body(buf.data() + fmt::kChunkHeaderSize, buf.size() - fmt::kChunkHeaderSize);
  fmt::RecordReader rr(body);
  fmt::Record r;
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kSubscribe && r.sub == 3u && r.rowid == 42u);
  CHECK(body.substr(r.payload_pos, r.length) == "billing");
  CHECK(body.substr(r.cond_pos, r.cond_length) == "kind = 'order'");
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kSubscribe && r.sub == 4u && r.rowid == 1u && r.cond_length == 0u);
  CHECK(body.substr(r.payload_pos, r.length) == "all");
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kSubRemove && r.sub == 3u && r.count == 3u);
  CHECK_EQ(rr.removed_id(r, 2), 0x123456789ull);
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kRemove && r.count == 1u);
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kUnsubscribe && r.sub == 4u);
  CHECK(!rr.next(&r));
  CHECK(rr.error().empty());
}

// A TXN_SUB_REMOVE record (a subscription's ends in a prepared part) round-trips among the
// part's records.
TEST(txn_sub_remove_records_round_trip) {
  std::string buf;
  fmt::ChunkBuilder b(&buf);
  const RowId ids[] = {5, 9, 0x123456789ull};
  b.add_txn_remove(77, ids, 1);
  b.add_txn_sub_remove(77, 3, ids, 3);
  b.add_txn_prepare(77, "xid-1");
  b.finish();
  std::string_view body(buf.data() + fmt::kChunkHeaderSize, buf.size() - fmt::kChunkHeaderSize);
  fmt::RecordReader rr(body);
  fmt::Record r;
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kTxnRemove && r.txn == 77u && r.count == 1u);
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kTxnSubRemove && r.txn == 77u && r.sub == 3u && r.count == 3u);
  CHECK_EQ(rr.removed_id(r, 0), 5u);
  CHECK_EQ(rr.removed_id(r, 2), 0x123456789ull);
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kTxnPrepare && r.txn == 77u);
  CHECK(!rr.next(&r));
  CHECK(rr.error().empty());
}

// A TXN_SRCID record round-trips among a prepared part's records.
TEST(txn_srcid_records_round_trip) {
  std::string buf;
  fmt::ChunkBuilder b(&buf);
  b.add_txn_row(3, 1000, "abc");
  b.add_txn_srcid(3, fmt::SourceMark{17, 0x123456789ull, true});
  b.add_txn_srcid(3, fmt::SourceMark{4, 9, false});
  b.add_txn_prepare(3, "xid");
  b.finish();
  std::string_view body(buf.data() + fmt::kChunkHeaderSize, buf.size() - fmt::kChunkHeaderSize);
  fmt::RecordReader rr(body);
  fmt::Record r;
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kTxnRow);
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kTxnSrcId);
  CHECK_EQ(r.txn, 3u);
  CHECK_EQ(r.source_id, 17u);
  CHECK_EQ(r.last_rowid, 0x123456789ull);
  CHECK(r.reset);
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kTxnSrcId && r.source_id == 4u && r.last_rowid == 9u && !r.reset);
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kTxnPrepare);
  CHECK(!rr.next(&r));
  CHECK(rr.error().empty());
}

// DEDUP_KEY records round-trip next to other records, keys of any bytes (a collation's sort
// key may hold zeros).
TEST(dedup_key_records_round_trip) {
  std::string buf;
  fmt::ChunkBuilder b(&buf);
  b.add_row(7, 1000, "x");
  const std::string binary_key("k\0\xff", 3);
  b.add_dedup_key(1'800'000'000'000ull, binary_key);
  b.add_dedup_key(5, "");
  b.finish();
  fmt::RecordReader rr(std::string_view(buf).substr(fmt::kChunkHeaderSize));
  fmt::Record r;
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kRow);
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kDedupKey);
  CHECK_EQ(r.time_ms, 1'800'000'000'000ull);
  CHECK(buf.substr(fmt::kChunkHeaderSize + r.payload_pos, r.length) == binary_key);
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kDedupKey);
  CHECK_EQ(r.time_ms, 5u);
  CHECK_EQ(r.length, 0u);
  CHECK(!rr.next(&r));
  CHECK(rr.error().empty());
}

// RETURN records round-trip, split like REMOVE lists, next to other records.
TEST(return_records_round_trip) {
  std::string buf;
  fmt::ChunkBuilder b(&buf);
  b.add_row(7, 1000, "x");
  const fmt::ReturnedRow rows[] = {{7, 3, 0}, {9, 65536, 1'800'000'000'000ull}};
  b.add_returns(rows, 2);
  b.add_returns(rows, 0);  // nothing: no empty record
  const RowId removed[] = {7};
  b.add_remove(removed, 1);
  b.finish();
  fmt::RecordReader rr(std::string_view(buf).substr(fmt::kChunkHeaderSize));
  fmt::Record rec;
  REQUIRE(rr.next(&rec));
  CHECK_EQ(rec.type, fmt::kRow);
  REQUIRE(rr.next(&rec));
  CHECK_EQ(rec.type, fmt::kReturn);
  REQUIRE(rec.count == 2u);
  for (uint32_t i = 0; i < 2; i++) {
    fmt::ReturnedRow got = rr.returned_row(rec, i);
    CHECK_EQ(got.id, rows[i].id);
    CHECK_EQ(got.deliveries, rows[i].deliveries);
    CHECK_EQ(got.due_ms, rows[i].due_ms);
  }
  REQUIRE(rr.next(&rec));
  CHECK_EQ(rec.type, fmt::kRemove);
  CHECK(!rr.next(&rec));
  CHECK(rr.error().empty());
  // A RETURN record cut short is malformed, not silently shorter.
  std::string body = std::string(buf).substr(fmt::kChunkHeaderSize, fmt::kRowHeaderSize + 1 + fmt::kReturnHeaderSize + 30);
  fmt::RecordReader cut(body);
  REQUIRE(cut.next(&rec));
  CHECK(!cut.next(&rec));
  CHECK(cut.error().find("is truncated") != std::string::npos);
}

// Version 5: every ROW carries row_checksum(id, payload) after its payload; a ROW of versions 1
// to 4 (type 1, no checksum) still parses, unchecked; add_row with a given checksum writes it
// as it is (compaction copying a damaged row keeps it damaged).
TEST(row_checksums_round_trip) {
  CHECK_EQ(fmt::row_checksum(1, "a"), crc32c(std::string("\x01\0\0\0\0\0\0\0a", 9)));
  CHECK(fmt::row_checksum(1, "a") != fmt::row_checksum(2, "a"));  // tied to the row id
  std::string buf;
  fmt::ChunkBuilder b(&buf);
  const size_t p1 = b.add_row(5, 100, "hello");
  const size_t p2 = b.add_row(6, 101, "world", 0xDEADBEEF);
  b.finish();
  CHECK_EQ(fmt::get_u32(buf.data() + p1 + 5), fmt::row_checksum(5, "hello"));
  CHECK_EQ(fmt::get_u32(buf.data() + p2 + 5), 0xDEADBEEFu);
  std::string_view body = std::string_view(buf).substr(fmt::kChunkHeaderSize);
  CHECK_EQ(static_cast<unsigned>(body[0]), unsigned{fmt::kCheckedRow});
  fmt::RecordReader rr(body);
  fmt::Record r;
  REQUIRE(rr.next(&r));
  CHECK(r.type == fmt::kRow && r.checked && r.rowid == 5u && r.length == 5u);
  CHECK_EQ(r.checksum, fmt::row_checksum(5, "hello"));
  CHECK_EQ(body.substr(r.payload_pos, r.length), "hello");
  REQUIRE(rr.next(&r));
  CHECK(r.checked && r.rowid == 6u && r.checksum == 0xDEADBEEFu);
  CHECK(!rr.next(&r));
  CHECK(rr.error().empty());
  // The checksum cut off: malformed, not a shorter row.
  fmt::RecordReader cut(body.substr(0, fmt::kRowHeaderSize + 5 + 3));
  CHECK(!cut.next(&r));
  CHECK(cut.error().find("is truncated") != std::string::npos);
  // A version-4 ROW: same header, no checksum.
  std::string old(1, '\x01');
  fmt::put_u64(&old, 9);
  fmt::put_u64(&old, 102);
  fmt::put_u32(&old, 3);
  old += "abc";
  fmt::RecordReader legacy(old);
  REQUIRE(legacy.next(&r));
  CHECK(r.type == fmt::kRow && !r.checked && r.rowid == 9u && r.length == 3u);
  CHECK_EQ(std::string_view(old).substr(r.payload_pos, r.length), "abc");
  CHECK(!legacy.next(&r));
  CHECK(legacy.error().empty());
}
