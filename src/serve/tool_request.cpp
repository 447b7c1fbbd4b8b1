#include "serve/tool_request.h"

#include <algorithm>
#include <set>

#include "serve/request_json.h"

namespace minfer::serve {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

Status wrong(const std::string& field, const std::string& want) {
  return Status::invalid_argument("'" + field + "' must be " + want);
}

}  // namespace

bool valid_tool_name(const std::string& name) {
  const auto ok = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  };
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), ok);
}

Status check_tool_parameters(const json& params, const std::string& field) {
  if (!params.is_object())
    return wrong(field, "a JSON schema object ({\"type\": \"object\", ...})");
  const auto type = params.find("type");
  if (type == params.end() || !type->is_string() || *type != "object") {
    return wrong(field + ".type", "\"object\" (tool arguments are an object)");
  }
  if (const auto props = params.find("properties"); props != params.end() && !props->is_object()) {
    return wrong(field + ".properties", "an object");
  }
  return Status::ok();
}

namespace {

Result<ToolDefinition> read_tool(const json& tool, size_t i) {
  const std::string field = "tools[" + std::to_string(i) + "]";
  if (!tool.is_object())
    return wrong(field, "an object {\"type\": \"function\", \"function\": {...}}");
  const auto type = tool.find("type");
  if (type == tool.end() || !type->is_string() || *type != "function") {
    return wrong(field + ".type", "\"function\" (the only kind of tool)");
  }
  const auto fn = tool.find("function");
  if (fn == tool.end() || !fn->is_object()) {
    return wrong(field + ".function", "an object {\"name\", \"description\", \"parameters\"}");
  }
  ToolDefinition def;
  const auto name = fn->find("name");
  if (name == fn->end() || !name->is_string() || !valid_tool_name(name->get<std::string>())) {
    return wrong(field + ".function.name", "1 to 64 letters, digits, '_', '-' or '.'");
  }
  def.name = *name;
  if (const auto d = fn->find("description"); d != fn->end() && !d->is_null()) {
    if (!d->is_string()) return wrong(field + ".function.description", "a string");
    def.description = *d;
  }
  const auto params = fn->find("parameters");
  if (params == fn->end() || params->is_null()) {
    def.parameters = ojson{{"type", "object"}, {"properties", ojson::object()}};
  } else {
    MINFER_RETURN_IF_ERROR(check_tool_parameters(*params, field + ".function.parameters"));
    def.parameters = ojson(*params);
  }
  return def;
}

Status read_choice(const json& body, ChatTools& out) {
  out.choice = out.tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  const auto it = body.find("tool_choice");
  if (it == body.end() || it->is_null()) return Status::ok();
  const std::string want =
      "\"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\"}}";
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    if (s == "none")
      out.choice = ToolChoice::kNone;
    else if (s == "required")
      out.choice = ToolChoice::kRequired;
    else if (s != "auto")
      return wrong("tool_choice", want);
  } else if (it->is_object()) {
    const auto fn = it->find("function");
    if (fn == it->end() || !fn->is_object() || !fn->contains("name") ||
        !(*fn)["name"].is_string()) {
      return wrong("tool_choice", want);
    }
    out.choice = ToolChoice::kNamed;
    out.named = (*fn)["name"];
    const auto same = [&](const ToolDefinition& t) { return t.name == out.named; };
    if (!out.tools.empty() && std::none_of(out.tools.begin(), out.tools.end(), same)) {
      return wrong("tool_choice.function.name",
                   "the name of one of 'tools' ('" + out.named + "' is none of them)");
    }
  } else {
    return wrong("tool_choice", want);
  }
  if (out.forced() && out.tools.empty()) {
    return Status::invalid_argument("'tool_choice' \"" +
                                    std::string(it->is_string() ? "required" : "function") +
                                    "\" needs 'tools'");
  }
  return Status::ok();
}

}  // namespace

Result<ChatTools> read_tools(const json& body) {
  ChatTools out;
  if (const auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return wrong("tools", "a list of function tools");
    std::set<std::string> names;
    for (size_t i = 0; i < it->size(); ++i) {
      MINFER_ASSIGN_OR_RETURN(ToolDefinition def, read_tool((*it)[i], i));
      if (!names.insert(def.name).second) {
        return wrong("tools[" + std::to_string(i) + "].function.name",
                     "unique ('" + def.name + "' is given twice)");
      }
      out.tools.push_back(std::move(def));
    }
    out.definitions = ojson(*it);
  }
  MINFER_RETURN_IF_ERROR(read_choice(body, out));
  if (const auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    if (!p->is_boolean()) return wrong("parallel_tool_calls", "true or false");
    out.parallel = p->get<bool>();
  }
  return out;
}

void order_tools(ChatTools& tools, std::string_view body) {
  if (tools.tools.empty()) return;
  auto doc = parse_request_ordered_json(body);
  if (!doc) return;
  const auto it = doc->find("tools");
  if (it == doc->end() || !it->is_array() || it->size() != tools.tools.size()) return;
  for (size_t i = 0; i < it->size(); ++i) {
    const ojson& fn = (*it)[i]["function"];
    if (const auto p = fn.find("parameters"); p != fn.end() && p->is_object()) {
      tools.tools[i].parameters = *p;
    }
  }
  tools.definitions = std::move(*it);
}

Result<runtime::ChatToolCall> read_tool_call(const json& call, const std::string& field) {
  const std::string want =
      "{\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}";
  if (!call.is_object()) return wrong(field, want);
  const auto fn = call.find("function");
  if (fn == call.end() || !fn->is_object()) return wrong(field + ".function", want);
  const auto name = fn->find("name");
  if (name == fn->end() || !name->is_string()) return wrong(field + ".function.name", "a string");
  runtime::ChatToolCall out;
  out.name = *name;
  if (const auto id = call.find("id"); id != call.end() && !id->is_null()) {
    if (!id->is_string()) return wrong(field + ".id", "a string");
    out.id = *id;
  }
  const auto args = fn->find("arguments");
  if (args == fn->end() || args->is_null()) {
    out.arguments = "{}";
  } else if (args->is_object()) {
    out.arguments = args->dump();
  } else if (args->is_string()) {
    out.arguments = *args;
  } else {
    return wrong(field + ".function.arguments", "a JSON string (or an object)");
  }
  // Through the request door again: the string may nest as deep as it likes.
  if (auto parsed = parse_request_ordered_json(out.arguments)) {
    out.arguments_value = template_value(*parsed);
  }
  return out;
}

tmpl::Value template_value(const ojson& j) {
  switch (j.type()) {
    case ojson::value_t::null:
      return tmpl::Value::none();
    case ojson::value_t::boolean:
      return tmpl::Value(j.get<bool>());
    case ojson::value_t::number_integer:
      return tmpl::Value(j.get<int64_t>());
    case ojson::value_t::number_unsigned:
      return j.get<uint64_t>() > uint64_t(INT64_MAX) ? tmpl::Value(j.get<double>())
                                                     : tmpl::Value(j.get<int64_t>());
    case ojson::value_t::number_float:
      return tmpl::Value(j.get<double>());
    case ojson::value_t::string:
      return tmpl::Value(j.get<std::string>());
    case ojson::value_t::array: {
      tmpl::List l;
      for (const ojson& x : j) l.push_back(template_value(x));
      return tmpl::Value(std::move(l));
    }
    case ojson::value_t::object: {
      tmpl::Dict d;
      for (const auto& [k, v] : j.items()) d.emplace_back(k, template_value(v));
      return tmpl::Value(std::move(d));
    }
    default:
      return {};
  }
}

}  // namespace minfer::serve
