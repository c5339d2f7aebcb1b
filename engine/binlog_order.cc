#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <log.h>

#include "engine/binlog_order.h"

#include <fstream>
#include <string>
#include <vector>

namespace q4m_engine {

namespace {

// Event header (v4): timestamp u32, type u8, server_id u32, length u32, next position u32,
// flags u16. An Xid event's body is the transaction's my_xid (8 bytes, as the server wrote it).
constexpr size_t kHeader = 19;
constexpr unsigned char kXidEvent = 16;
constexpr unsigned char kStartEncryptionEvent = 164;
constexpr char kMagic[4] = {'\xfe', 'b', 'i', 'n'};

uint32_t u32(const char* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;  // little endian, as the format (and this x86_64 build) has it
}

// Appends the my_xid of each Xid event of `path`, in order; false if it cannot be read.
bool read_xids(const std::string& path, std::vector<uint64_t>* out) {
  std::ifstream in(path, std::ios::binary);
  char magic[4];
  if (!in.read(magic, 4) || memcmp(magic, kMagic, 4) != 0) return false;
  std::vector<char> body;
  char h[kHeader];
  while (in.read(h, kHeader)) {
    const unsigned char type = static_cast<unsigned char>(h[4]);
    const uint32_t length = u32(h + 9);
    if (length < kHeader || length > (1u << 30)) break;  // a torn tail
    body.resize(length - kHeader);
    if (!in.read(body.data(), static_cast<std::streamsize>(body.size()))) break;
    if (type == kStartEncryptionEvent) return false;
    if (type == kXidEvent && body.size() >= 8) {
      uint64_t xid;
      memcpy(&xid, body.data(), 8);
      out->push_back(xid);
    }
  }
  return true;
}

}  // namespace

std::unordered_map<uint64_t, uint64_t> binlog_commit_order(int files) {
  std::unordered_map<uint64_t, uint64_t> order;
  if (!opt_bin_log || !mysql_bin_log.get_index_fname() || !*mysql_bin_log.get_index_fname()) return order;
  std::ifstream index(mysql_bin_log.get_index_fname());
  std::vector<std::string> names;
  for (std::string line; std::getline(index, line);)
    if (!line.empty()) names.push_back(line);
  const size_t first = names.size() > static_cast<size_t>(files) ? names.size() - files : 0;
  std::vector<uint64_t> xids;
  for (size_t i = first; i < names.size(); i++)
    if (!read_xids(names[i], &xids)) return order;
  // query ids restart with each server run: the newest occurrence of an id is the crashed run's.
  for (size_t i = 0; i < xids.size(); i++) order[xids[i]] = i;
  return order;
}

}  // namespace q4m_engine
