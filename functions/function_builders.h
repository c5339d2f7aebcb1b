// The builders of queue functions: MariaDB's Create_native_func with the contract's
// wrong-count error (`Message`, e.g. "queue_end() takes no arguments"), for a function with no
// arguments and for one with kMin to kMax of them.
#pragma once
#include <my_global.h>
#include <sql_class.h>
#include <item_create.h>

#include "functions/queue_item.h"

namespace q4m_functions {

template <typename ItemT, const char* Message>
class Create_func_no_args : public Create_native_func {
 public:
  Item* create_native(THD* thd, const LEX_CSTRING*, List<Item>* args) override {
    if (args && args->elements) {
      raise_argument_count_error(Message);
      return nullptr;
    }
    mark_statement_side_effects(thd);
    return new (thd->mem_root) ItemT(thd);
  }
  static Create_func_no_args s_singleton;
};

template <typename ItemT, const char* Message>
Create_func_no_args<ItemT, Message> Create_func_no_args<ItemT, Message>::s_singleton;

template <typename ItemT, const char* Message, unsigned kMin, unsigned kMax>
class Create_func_args : public Create_native_func {
 public:
  Item* create_native(THD* thd, const LEX_CSTRING*, List<Item>* args) override {
    const unsigned n = args ? args->elements : 0;
    if (n < kMin || n > kMax) {
      raise_argument_count_error(Message);
      return nullptr;
    }
    mark_statement_side_effects(thd);
    return new (thd->mem_root) ItemT(thd, *args);
  }
  static Create_func_args s_singleton;
};

template <typename ItemT, const char* Message, unsigned kMin, unsigned kMax>
Create_func_args<ItemT, Message, kMin, kMax> Create_func_args<ItemT, Message, kMin, kMax>::s_singleton;

}  // namespace q4m_functions
