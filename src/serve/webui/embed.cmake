# Turns a file into a C++ source that defines its bytes, at build time:
#   cmake -DINPUT=page.html -DOUTPUT=page.cpp -DNAMESPACE=ns -DSYMBOL=kPage -P embed.cmake
# The source defines `extern const char SYMBOL[]` (the bytes and a final NUL)
# and `extern const std::size_t SYMBOL_size` (the bytes without the NUL) in
# NAMESPACE. The bytes are written as character literals, not one string:
# -Wpedantic warns about string literals past 65,536 characters.
foreach(var INPUT OUTPUT NAMESPACE SYMBOL)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed.cmake: -D${var}=... is missing")
  endif()
endforeach()

file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" n_hex)
math(EXPR n_bytes "${n_hex} / 2")
# 16 bytes a line: "aabb..." -> "'\xaa','\xbb',...\n".
string(REGEX REPLACE "([0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f])"
       "\\1\n    " hex "${hex}")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")

get_filename_component(input_name "${INPUT}" NAME)
set(source "// Generated from ${input_name} by embed.cmake at build time: do not edit.
#include <cstddef>

namespace ${NAMESPACE} {

extern const char ${SYMBOL}[];
extern const std::size_t ${SYMBOL}_size;

const char ${SYMBOL}[] = {
    ${bytes}'\\0'};
const std::size_t ${SYMBOL}_size = ${n_bytes};

}  // namespace ${NAMESPACE}
")
# Written only when it changed, so that an unchanged page rebuilds nothing.
file(CONFIGURE OUTPUT "${OUTPUT}" CONTENT "${source}" @ONLY)
