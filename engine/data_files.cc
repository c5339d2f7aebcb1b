#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <sql_table.h>

#include "engine/data_files.h"

#include <filesystem>

#include "core/table/registry.h"

namespace q4m_engine {

namespace {

namespace fs = std::filesystem;

std::string decoded_name(const std::string& file_name) {
  char buf[NAME_LEN + 1];
  size_t n = filename_to_tablename(file_name.c_str(), buf, sizeof(buf), false);
  return std::string(buf, n);
}

}  // namespace

void for_each_data_file(const std::function<bool(const std::string& db, const std::string& table,
                                                 const std::string& path)>& fn) {
  const std::string ext = q4m::kDataFileExtension;
  std::error_code ec;
  for (const fs::directory_entry& db_dir : fs::directory_iterator(".", ec)) {
    if (!db_dir.is_directory(ec)) continue;
    const std::string db_file = db_dir.path().filename().string();
    std::error_code ec2;
    for (const fs::directory_entry& f : fs::directory_iterator(db_dir.path(), ec2)) {
      const std::string file = f.path().filename().string();
      if (file.size() <= ext.size() || file.compare(file.size() - ext.size(), ext.size(), ext) != 0) continue;
      if (file.compare(0, 4, "#sql") == 0) continue;  // ALTER/TRUNCATE work files
      const std::string table_file = file.substr(0, file.size() - ext.size());
      if (!fn(decoded_name(db_file), decoded_name(table_file), "./" + db_file + "/" + file)) return;
    }
  }
}

}  // namespace q4m_engine
