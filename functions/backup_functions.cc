// queue_backup_stage(dir): the next BACKUP STAGE END (a mariadb-backup run) copies every QUEUE
// data file into `dir` (engine/backup.h). For tools/backup/q4m-backup; needs RELOAD, as
// BACKUP STAGE does.
#define MYSQL_SERVER 1
#include <my_global.h>
#include <sql_class.h>
#include <sql_acl.h>
#include <sql_parse.h>
#include <item_create.h>
#include <mysql/plugin_function.h>

#include <sys/stat.h>

#include <string>

#include "engine/backup.h"
#include "functions/function_builders.h"
#include "functions/function_plugins.h"
#include "functions/queue_item.h"

namespace q4m_functions {

namespace {

class Item_func_queue_backup_stage final : public Item_queue_action {
 public:
  Item_func_queue_backup_stage(THD* thd, List<Item>& args) : Item_queue_action(thd, args) {}
  LEX_CSTRING func_name_cstring() const override {
    static LEX_CSTRING name = {STRING_WITH_LEN("queue_backup_stage")};
    return name;
  }
  bool fix_length_and_dec(THD*) override {
    max_length = 1;
    return false;
  }
  Item* shallow_copy(THD* thd) const override { return get_item_copy<Item_func_queue_backup_stage>(thd, this); }

 protected:
  longlong run(THD* thd) override {
    if (check_global_access(thd, RELOAD_ACL)) return 0;
    StringBuffer<512> buf;
    String* s = args[0]->val_str(&buf);
    if (!s || args[0]->null_value || s->length() == 0 || s->ptr()[0] != '/') {
      my_printf_error(ER_WRONG_ARGUMENTS, "queue_backup_stage(): argument 1: expected an absolute directory path",
                      MYF(0));
      return 0;
    }
    const std::string dir(s->ptr(), s->length());
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      my_printf_error(ER_WRONG_ARGUMENTS, "queue_backup_stage(): argument 1: '%s' is not a directory", MYF(0),
                      dir.c_str());
      return 0;
    }
    q4m_engine::stage_next_backup(dir);
    return 1;
  }
};

constexpr char kBackupStageArgs[] = "queue_backup_stage() takes 1 argument (a directory)";
using Create_queue_backup_stage = Create_func_args<Item_func_queue_backup_stage, kBackupStageArgs, 1, 1>;

}  // namespace

Plugin_function queue_backup_stage_plugin(&Create_queue_backup_stage::s_singleton);

}  // namespace q4m_functions
