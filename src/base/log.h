// The one sink for what library code has to say outside its return values:
// the device in use, a weight-upload summary, why a GPU takes no part, plan
// traces. Library code never writes to stderr itself; it calls log_message().
//
// Contract: the default sink writes "minfer: <message>\n" to stderr (a
// message that ends in '\n' gets no second one), passing the text through
// printable_text so that strings from a file cannot act on the terminal.
// set_log_sink() replaces it (a server adds timestamps or sends it to its own
// log; a test captures it); an empty function restores the default.
// Messages below the minimum level (set_min_log_level, default kInfo) are
// dropped before formatting reaches the sink.
// Threading: log_message() may be called from any thread; calls are serialized, so a
// sink sees one message at a time. set_log_sink must not be called from
// inside a sink.
// The one exception: progress bars (base/progress.h) draw on a terminal
// directly, because they redraw one line in place.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace minfer {

enum class LogLevel : uint8_t { kDebug, kInfo, kWarning, kError };

const char* log_level_name(LogLevel level);

using LogSink = std::function<void(LogLevel level, std::string_view message)>;

void set_log_sink(LogSink sink);
void set_min_log_level(LogLevel level);
void log_message(LogLevel level, std::string_view message);

inline void log_info(std::string_view message) {
  log_message(LogLevel::kInfo, message);
}
inline void log_warning(std::string_view message) {
  log_message(LogLevel::kWarning, message);
}

}  // namespace minfer
