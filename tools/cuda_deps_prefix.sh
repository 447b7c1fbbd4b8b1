#!/bin/bash
# Assembles the dependency prefix that tools/cuda_test.sh takes as DEPS_PREFIX
# for a GPU machine without minfer's Debian packages (docs/CUDA.md, "Running
# the GPU tests"), from the packages tools/install_deps.sh put on this machine:
# headers, static PCRE2/utf8proc/gtest, the Boost headers the HTTP transport
# includes (Beast and Asio are header-only), nlohmann-json's CMake package,
# the Qwen2 tokenizer for `minfer synth`, and run.sh, which points a shell there.
#   bash tools/cuda_deps_prefix.sh [DIR]     (default: build-cudadeps)
# The folder is git-ignored: name it in the device call's `carry`, then
#   source DIR/run.sh; bash tools/cuda_test.sh /tmp/bc DIR
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-cudadeps}
inc=/usr/include
lib=/usr/lib/x86_64-linux-gnu
rm -rf "$dir"
mkdir -p "$dir/include" "$dir/lib/pkgconfig" "$dir/share/cmake"
for h in pcre2.h utf8proc.h gtest gmock nlohmann; do
  cp -r "$inc/$h" "$dir/include/"
done
# Boost (Beast and Asio are header-only) for a machine without Boost of its
# own: all of asio and beast and what clang and g++ reach from the transport,
# in a folder of its own that run.sh names only where the machine has no
# Boost (two versions mixed in one compile do not build). All of Boost is 140 MB.
boost="$dir/boost/include"
for src in src/serve/http_server.cpp src/serve/http_connection.cpp; do
  for cxx in clang++ g++; do "$cxx" -std=c++20 -Isrc -M "$src"; done
done | tr ' \\' '\n\n' | grep '^/usr/include/boost/' | sort -u | while read -r h; do
  mkdir -p "$boost/$(dirname "${h#/usr/include/}")"
  cp "$h" "$boost/${h#/usr/include/}"
done
cp -r "$inc/boost/asio" "$inc/boost/beast" "$boost/boost/"
cp "$inc/boost/version.hpp" "$inc/boost/config.hpp" "$boost/boost/"
cp "$lib/libpcre2-8.a" "$lib/libutf8proc.a" "$lib"/libgtest*.a "$lib"/libgmock*.a "$dir/lib/"
cp -r /usr/share/cmake/nlohmann_json "$dir/share/cmake/"
# Static libraries are linked with -L/-l (a full path lands before the objects).
pc() {  # name, Libs line, Cflags line, version
  printf 'prefix=${pcfiledir}/../..\nlibdir=${prefix}/lib\nincludedir=${prefix}/include\n\n' \
    > "$dir/lib/pkgconfig/$1.pc"
  printf 'Name: %s\nDescription: %s\nVersion: %s\nLibs: %s\nCflags: %s\n' "$1" "$1" "$4" "$2" "$3" \
    >> "$dir/lib/pkgconfig/$1.pc"
}
pc libpcre2-8 '-L${libdir} -lpcre2-8' '-I${includedir}' "$(pkg-config --modversion libpcre2-8)"
pc libutf8proc '-L${libdir} -lutf8proc' '-I${includedir}' "$(pkg-config --modversion libutf8proc)"
cp -r ../shared/data/qwen2-tokenizer "$dir/qwen2-tokenizer"
cat > "$dir/run.sh" <<'SH'
# Sourced on the GPU machine: the prefix's shared libraries for the link and the run.
_deps=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH=$_deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CMAKE_PREFIX_PATH=$_deps/share/cmake/nlohmann_json:$_deps${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
export LDFLAGS="-Wl,-rpath-link,$_deps/lib ${LDFLAGS:-}"
# The prefix's Boost headers only where the machine has none of its own.
[ -f /usr/include/boost/version.hpp ] || export BOOST_ROOT=$_deps/boost
SH
du -sh "$dir"
