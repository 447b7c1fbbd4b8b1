// Python's str methods as chat templates call them (strip, split, title,
// ...), on UTF-8 bytes with ASCII case rules.
#pragma once

#include <cstdint>
#include <string>

#include "template/value.h"

namespace minfer::tmpl {

bool is_space(char c);
// chars null: whitespace.
std::string strip(const std::string& s, const std::string* chars, bool left, bool right);
std::string lower(std::string s);
std::string upper(std::string s);
std::string title(std::string s);
std::string capitalize(const std::string& s);
// count < 0: every occurrence.
std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        int64_t count = -1);
// sep none or undefined: runs of whitespace; max_split < 0: no limit.
List split(const std::string& s, const Value& sep, int64_t max_split);
// MarkupSafe's escape: & < > " ' as &amp; &lt; &gt; &#34; &#39;.
std::string html_escape(const std::string& s);

}  // namespace minfer::tmpl
