// The template's built-in filters, tests, methods and globals (the lists are
// in template/template.h). Shared by the renderer; one table each.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "template/value.h"

namespace minfer::tmpl {

Result<Value> call_filter(const std::string& name, const Value& v, std::vector<Value>& args,
                          Dict& kwargs);
Result<bool> call_test(const std::string& name, const Value& v, std::vector<Value>& args);
// v.name: a dict's key, or a bound method of a string, dict or list;
// undefined when there is none.
Value attribute(const Value& v, const std::string& name);
// What iterating v gives, as Python does: a list's items, a dict's keys, a
// string's characters (UTF-8 sequences); nothing for undefined.
Result<List> items_of(const Value& v);
// range, namespace, dict, raise_exception, strftime_now.
Dict globals();

}  // namespace minfer::tmpl
