// The template interpreter against Python's jinja2: every case of
// tests/template/golden/templates.json (tools/gen_template_goldens.py: the
// real chat templates of golden/templates/ and Qwen2, hand-written chat and
// feature templates, conversations with and without a generation prompt)
// renders to jinja2's text, or fails where jinja2 raised. Then the
// interpreter's own contract: errors name the line, hostile templates are
// bounded.
#include "template/template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "base/json.h"

namespace minfer::tmpl {
namespace {

using nlohmann::ordered_json;

// Document order, as Python's dicts keep it.
Value from_json(const ordered_json& j) {
  if (j.is_null()) return Value::none();
  if (j.is_boolean()) return Value(j.get<bool>());
  if (j.is_number_integer()) {
    auto i = json_to_int(j, "a golden integer");
    if (i.is_ok()) return Value(*i);
  }
  if (j.is_number()) return Value(j.get<double>());
  if (j.is_string()) return Value(j.get<std::string>());
  if (j.is_array()) {
    List l;
    for (const ordered_json& x : j) l.push_back(from_json(x));
    return Value(std::move(l));
  }
  Dict d;
  for (const auto& [k, v] : j.items()) d.emplace_back(k, from_json(v));
  return Value(std::move(d));
}

Result<std::string> render(std::string_view source, const Dict& context = {}) {
  MINFER_ASSIGN_OR_RETURN(Template t, Template::parse(source));
  return t.render(context);
}

std::string read_template(const std::string& name) {
  std::ifstream f(std::string(MINFER_TEST_DATA_DIR) + "/golden/templates/" + name);
  EXPECT_TRUE(f) << "template file " << name << " missing";
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Template, MatchesJinja2OnEveryGoldenCase) {
  std::ifstream f(std::string(MINFER_TEST_DATA_DIR) + "/golden/templates.json");
  ASSERT_TRUE(f) << "golden file missing";
  std::stringstream ss;
  ss << f.rdbuf();
  auto cases = parse_ordered_json(ss.str());
  ASSERT_TRUE(cases.is_ok()) << cases.message();
  ASSERT_GE(cases->size(), 60u);
  int failures = 0;
  for (const ordered_json& c : *cases) {
    const std::string name = c.at("name").get<std::string>();
    const Value context = from_json(c.at("context"));
    // A real chat template is named ("template_file"), the others inline.
    const std::string source = c.contains("template_file")
                                   ? read_template(c.at("template_file").get<std::string>())
                                   : c.at("template").get<std::string>();
    auto got = render(source, context.as_dict());
    if (c.contains("error")) {
      EXPECT_FALSE(got.is_ok()) << name << ": jinja2 failed, we rendered: " << *got;
      failures += got.is_ok();
      continue;
    }
    if (!got.is_ok()) {  // report every case that fails, not just the first
      ADD_FAILURE() << name << ": " << got.message();
      ++failures;
      continue;
    }
    const std::string want = c.at("expected").get<std::string>();
    EXPECT_EQ(*got, want) << name;
    failures += *got != want;
  }
  EXPECT_EQ(failures, 0);
}

TEST(Template, ErrorsNameTheLine) {
  auto unclosed = render("a\nb {{ x ");
  ASSERT_FALSE(unclosed.is_ok());
  EXPECT_NE(unclosed.message().find("line 2"), std::string::npos) << unclosed.message();
  auto no_end = render("{% if x %}\nyes");
  ASSERT_FALSE(no_end.is_ok());
  EXPECT_NE(no_end.message().find("endif"), std::string::npos) << no_end.message();
  auto unknown = render("\n\n{{ x | frobnicate }}");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.message().find("line 3"), std::string::npos) << unknown.message();
  EXPECT_NE(unknown.message().find("frobnicate"), std::string::npos) << unknown.message();
  auto tag = render("{% include 'x' %}");
  ASSERT_FALSE(tag.is_ok());
  EXPECT_NE(tag.message().find("include"), std::string::npos) << tag.message();
  auto raised = render("{{ raise_exception('no tools here') }}");
  ASSERT_FALSE(raised.is_ok());
  EXPECT_NE(raised.message().find("no tools here"), std::string::npos) << raised.message();
  auto attr = render("{{ missing.field }}");
  ASSERT_FALSE(attr.is_ok()) << "an attribute of an undefined value is an error";
}

TEST(Template, HostileTemplatesAreBounded) {
  EXPECT_FALSE(render("{% for i in range(1000000) %}{% endfor %}").is_ok());
  EXPECT_FALSE(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").is_ok());
  EXPECT_FALSE(render("{{ 1 // 0 }}").is_ok());
  EXPECT_FALSE(render("{{ 'a' < 1 }}").is_ok());
  EXPECT_FALSE(render("{{ 'ab' * 1000000 }}").is_ok()) << "repetition past 1 MiB";
  auto fine = render("{{ 'ab' * 3 }}");
  ASSERT_TRUE(fine.is_ok());
  EXPECT_EQ(*fine, "ababab");
}

// A list nested `levels` deep around an int.
Value nested(int levels) {
  Value v(1);
  for (int i = 0; i < levels; ++i) v = Value(List{v});
  return v;
}

// Frees a deeply nested value one level at a time (its destructor recurses).
void unwrap(Value& v) {
  while (v.is_list() && !v.as_list().empty()) {
    Value inner = v.as_list()[0];
    v = inner;
  }
}

TEST(Template, DeepContextValuesAreRefusedNamingTheLimit) {
  Value deep = nested(100'000);
  for (const char* source : {"{{ x | tojson }}", "{{ x }}", "{{ x == x }}", "{{ [x] < [x] }}"}) {
    auto r = render(source, {{"x", deep}});
    ASSERT_FALSE(r.is_ok()) << source;
    EXPECT_NE(r.message().find(std::to_string(kMaxValueDepth) + " levels"), std::string::npos)
        << r.message();
  }
  unwrap(deep);
  Value at_limit = nested(kMaxValueDepth);
  auto fine = render("{{ x | tojson }}", {{"x", at_limit}});
  ASSERT_TRUE(fine.is_ok()) << fine.message();
  EXPECT_EQ(*fine, std::string(kMaxValueDepth, '[') + "1" + std::string(kMaxValueDepth, ']'));
  auto over = render("{{ x | tojson }}", {{"x", nested(kMaxValueDepth + 1)}});
  EXPECT_FALSE(over.is_ok());
}

TEST(Template, ValuesATemplateNestsAreBoundedToo) {
  // A namespace that holds itself: printing stops at the limit, tojson and
  // comparison are errors, nothing recurses without end.
  const std::string ns = "{% set ns = namespace(a=1) %}{% set ns.me = ns %}";
  auto printed = render(ns + "{{ ns }}");
  ASSERT_TRUE(printed.is_ok()) << printed.message();
  EXPECT_NE(printed->find("..."), std::string::npos);
  EXPECT_LT(printed->size(), 10'000u);
  auto json = render(ns + "{{ ns | tojson }}");
  ASSERT_FALSE(json.is_ok());
  EXPECT_NE(json.message().find(std::to_string(kMaxValueDepth)), std::string::npos);
  EXPECT_TRUE(render(ns + "{{ ns == ns }}").is_ok());
  // Nesting built in a loop (every level a new list) prints with "..." and
  // does not compare.
  const std::string loop =
      "{% set ns = namespace(x=1) %}{% for i in range(300) %}{% set ns.x = [ns.x] %}"
      "{% endfor %}";
  auto deep = render(loop + "{{ ns.x }}");
  ASSERT_TRUE(deep.is_ok()) << deep.message();
  EXPECT_EQ(deep->find("..."), static_cast<size_t>(kMaxValueDepth));
  auto compared = render(loop + "{{ ns.x < ns.x }}");
  ASSERT_FALSE(compared.is_ok());
  EXPECT_NE(compared.message().find(std::to_string(kMaxValueDepth)), std::string::npos);
}

TEST(Template, UndefinedValuesPrintNothingAndAreFalse) {
  Dict ctx;
  ctx.emplace_back("d", Value(Dict{{"a", Value(1)}}));
  auto r = render("[{{ nope }}][{{ d.b }}][{{ d['b'] }}]{% if d.b %}x{% else %}y{% endif %}", ctx);
  ASSERT_TRUE(r.is_ok()) << r.message();
  EXPECT_EQ(*r, "[][][]y");
}

}  // namespace
}  // namespace minfer::tmpl
