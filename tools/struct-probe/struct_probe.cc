// Prints the size of the server structs the plugin touches and the offsets of the members it
// uses, one "name value" line each, compiled as the plugin is (tools/struct-probe/probe.sh).
// Two builds that print the same lines agree on the layout of what q4m uses: a different C++
// standard, or an SDK whose generated headers come from a newer server than its source
// headers (docs/build.md "When Debian's archive lacks the server's source").
#define MYSQL_SERVER 1
#include <my_global.h>
#include <cstddef>
#include <cstdio>
#include "sql_class.h"
#include "table.h"
#include "handler.h"
#include "item_func.h"
#include "item_strfunc.h"
#include "item_create.h"
#include "field.h"
#include "sql_lex.h"
#include "mdl.h"
#include "structs.h"

#define SIZE(T) std::printf("sizeof(%s) %zu\n", #T, sizeof(T))
#define OFF(T, m) std::printf("offsetof(%s, %s) %zu\n", #T, #m, offsetof(T, m))

// handler's protected members, named through a derived class (same offsets: single base).
struct handler_probe : handler {
  static void print() {
#define HOFF(m) std::printf("offsetof(handler, %s) %zu\n", #m, offsetof(handler_probe, m))
    HOFF(table_share); HOFF(table); HOFF(ht); HOFF(ref); HOFF(stats); HOFF(ref_length);
    HOFF(active_index); HOFF(next_insert_id); HOFF(lookup_handler); HOFF(cached_table_flags);
  }
};
static void handler_members() { handler_probe::print(); }
struct item_func_probe : Item_func {
  static void print() {
    std::printf("offsetof(Item_func, args) %zu\n", offsetof(item_func_probe, args));
    std::printf("offsetof(Item_func, arg_count) %zu\n", offsetof(item_func_probe, arg_count));
  }
};
struct field_blob_probe : Field_blob {
  static void print() {
    std::printf("offsetof(Field_blob, packlength) %zu\n", offsetof(field_blob_probe, packlength));
  }
};
static void other_protected_members() { item_func_probe::print(); field_blob_probe::print(); }

int main() {
  SIZE(THD); SIZE(TABLE_SHARE); SIZE(TABLE); SIZE(handler); SIZE(Item); SIZE(Item_func);
  SIZE(Field); SIZE(Field_blob); SIZE(Field_varstring); SIZE(LEX); SIZE(TABLE_LIST);
  SIZE(MDL_request); SIZE(MDL_context); SIZE(handlerton); SIZE(KEY); SIZE(HA_CREATE_INFO);
  SIZE(Security_context); SIZE(system_variables); SIZE(Diagnostics_area); SIZE(String);
  SIZE(st_mysql_plugin); SIZE(st_maria_plugin); SIZE(Open_tables_backup);

  OFF(THD, query_id); OFF(THD, db); OFF(THD, lex); OFF(THD, mdl_context); OFF(THD, mem_root);
  OFF(THD, variables); OFF(THD, transaction); OFF(THD, open_tables); OFF(THD, thread_id);
  OFF(THD, slave_thread); OFF(THD, security_ctx); OFF(THD, locked_tables_mode); OFF(THD, killed);
  OFF(THD, global_read_lock); OFF(THD, backup_commit_lock); OFF(THD, ha_data);
  OFF(THD, temporary_tables); OFF(THD, start_time); OFF(THD, server_status);

  OFF(TABLE_SHARE, normalized_path); OFF(TABLE_SHARE, path); OFF(TABLE_SHARE, db);
  OFF(TABLE_SHARE, table_name); OFF(TABLE_SHARE, tabledef_version); OFF(TABLE_SHARE, null_bytes);
  OFF(TABLE_SHARE, option_struct); OFF(TABLE_SHARE, option_list); OFF(TABLE_SHARE, field);
  OFF(TABLE_SHARE, fields); OFF(TABLE_SHARE, ha_share); OFF(TABLE_SHARE, default_values);
  OFF(TABLE_SHARE, db_plugin); OFF(TABLE_SHARE, row_type); OFF(TABLE_SHARE, tmp_table);
  OFF(TABLE_SHARE, reclength); OFF(TABLE_SHARE, max_rows); OFF(TABLE_SHARE, key_info);
  OFF(TABLE_SHARE, keys); OFF(TABLE_SHARE, primary_key); OFF(TABLE_SHARE, blob_fields);

  OFF(TABLE, s); OFF(TABLE, file); OFF(TABLE, field); OFF(TABLE, record); OFF(TABLE, in_use);
  OFF(TABLE, reginfo); OFF(TABLE, read_set); OFF(TABLE, write_set); OFF(TABLE, status);
  OFF(TABLE, next_number_field); OFF(TABLE, pos_in_table_list); OFF(TABLE, key_info);

  handler_members();

  OFF(handlerton, slot); OFF(handlerton, savepoint_offset); OFF(handlerton, close_connection);
  OFF(handlerton, commit); OFF(handlerton, rollback); OFF(handlerton, prepare);
  OFF(handlerton, recover); OFF(handlerton, commit_by_xid); OFF(handlerton, rollback_by_xid);
  OFF(handlerton, create); OFF(handlerton, drop_table); OFF(handlerton, flags);
  OFF(handlerton, table_options); OFF(handlerton, tablefile_extensions);
  OFF(handlerton, discover_table_existence); OFF(handlerton, kill_query);
  OFF(handlerton, commit_ordered); OFF(handlerton, commit_checkpoint_request);
  OFF(handlerton, prepare_ordered); OFF(handlerton, show_status);

  OFF(Item, null_value); OFF(Item, name); other_protected_members();
  OFF(Field, ptr); OFF(Field, null_ptr); OFF(Field, field_name); OFF(Field, field_length);
  OFF(Field, null_bit); OFF(Field, flags);
  OFF(Field_varstring, length_bytes);

  OFF(LEX, sql_command); OFF(LEX, query_tables); OFF(LEX, create_info); OFF(LEX, alter_info);
  OFF(TABLE_LIST, db); OFF(TABLE_LIST, table_name); OFF(TABLE_LIST, table); OFF(TABLE_LIST, grant);
  OFF(TABLE_LIST, mdl_request); OFF(TABLE_LIST, next_global); OFF(TABLE_LIST, lock_type);
  OFF(MDL_request, type); OFF(MDL_request, ticket); OFF(MDL_request, key);
  OFF(KEY, key_part); OFF(KEY, user_defined_key_parts); OFF(KEY, flags); OFF(KEY, name);
  OFF(HA_CREATE_INFO, option_struct); OFF(HA_CREATE_INFO, max_rows); OFF(HA_CREATE_INFO, row_type);
  OFF(HA_CREATE_INFO, auto_increment_value); OFF(HA_CREATE_INFO, table_options);
  OFF(system_variables, lock_wait_timeout); OFF(system_variables, option_bits);
  OFF(system_variables, sql_mode); OFF(system_variables, tx_isolation);
  OFF(Security_context, master_access); OFF(Security_context, priv_user);
  return 0;
}
