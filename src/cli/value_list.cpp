#include "cli/value_list.h"

#include <charconv>
#include <optional>
#include <string>

namespace minfer::cli {
namespace {

constexpr const char* kSyntax = "N, FIRST-LAST, FIRST-LAST+STEP or FIRST-LAST*MULT";

// The whole of `s` as a decimal integer (an optional '-' sign), or nullopt.
std::optional<int64_t> whole_integer(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// One item split into its parts: "8-64*2" is first "8", last "64", op '*', step "2".
struct Item {
  std::string_view first, last, step;
  char op = 0;  // 0 (a single value), '+' or '*'
  bool range = false;
};

Item split_item(std::string_view item) {
  Item it;
  // A '-' at the start is the sign of FIRST; the next one separates the bounds.
  const size_t dash = item.find('-', 1);
  if (dash == std::string_view::npos) {
    it.first = item;
    return it;
  }
  it.range = true;
  it.first = item.substr(0, dash);
  std::string_view rest = item.substr(dash + 1);
  const size_t op = rest.find_first_of("+*");
  it.last = rest.substr(0, op);
  if (op != std::string_view::npos) {
    it.op = rest[op];
    it.step = rest.substr(op + 1);
  }
  return it;
}

class ListParser {
 public:
  ListParser(std::string_view context, int64_t min, int64_t max)
      : context_(context), min_(min), max_(max) {}

  Status add_item(std::string_view item);
  std::vector<int64_t> take() { return std::move(values_); }

 private:
  Status error(const std::string& what) const {
    return Status::invalid_argument(std::string(context_) + ": " + what);
  }
  Result<int64_t> bound(std::string_view text, std::string_view item) const;
  Status add(int64_t v);

  std::string_view context_;
  int64_t min_, max_;
  std::vector<int64_t> values_;
};

Result<int64_t> ListParser::bound(std::string_view text, std::string_view item) const {
  const auto v = whole_integer(text);
  if (!v) {
    if (text == item) return error("'" + std::string(item) + "' is not an integer");
    return error("'" + std::string(item) + "' is not a value or a range (" + kSyntax + ")");
  }
  if (*v < min_ || *v > max_) {
    return error(std::to_string(*v) + " is out of range (" + std::to_string(min_) + " to " +
                 std::to_string(max_) + ")");
  }
  return *v;
}

Status ListParser::add(int64_t v) {
  if (values_.size() == kMaxListValues) {
    return error("more than " + std::to_string(kMaxListValues) + " values");
  }
  values_.push_back(v);
  return Status::ok();
}

Status ListParser::add_item(std::string_view item) {
  if (item.empty()) return error("an empty item (values are separated by single commas)");
  const Item it = split_item(item);
  MINFER_ASSIGN_OR_RETURN(const int64_t first, bound(it.first, item));
  if (!it.range) return add(first);
  MINFER_ASSIGN_OR_RETURN(const int64_t last, bound(it.last, item));
  const std::string quoted = "'" + std::string(item) + "'";
  if (last < first) return error(quoted + " is an empty range (LAST is below FIRST)");
  int64_t step = it.op == '*' ? 2 : 1;
  if (it.op != 0) {
    const auto s = whole_integer(it.step);
    if (!s) return error(quoted + " is not a value or a range (" + kSyntax + ")");
    step = *s;
  }
  if (it.op == '*') {
    if (step < 2) return error(quoted + ": the multiplier must be at least 2");
    if (first < 1) return error(quoted + ": a multiplied range must start at 1 or more");
  } else if (step < 1) {
    return error(quoted + ": the step must be at least 1");
  }
  // Each next value is checked against LAST before it is formed, so nothing overflows.
  for (int64_t v = first;;) {
    MINFER_RETURN_IF_ERROR(add(v));
    if (it.op == '*' ? v > last / step : step > last - v) break;
    v = it.op == '*' ? v * step : v + step;
  }
  return Status::ok();
}

}  // namespace

Result<std::vector<int64_t>> parse_value_list(std::string_view context, std::string_view text,
                                              int64_t min, int64_t max) {
  ListParser parser(context, min, max);
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string_view::npos ? text.size() : comma;
    MINFER_RETURN_IF_ERROR(parser.add_item(text.substr(start, end - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return parser.take();
}

}  // namespace minfer::cli
