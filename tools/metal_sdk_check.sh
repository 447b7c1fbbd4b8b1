#!/usr/bin/env bash
# Compile the Metal backend's host code (src/backend/metal/*.mm and *.cpp, and
# every header they include) against a real macOS SDK, on Linux, with the
# project's C++20 flags and warnings; then link the engine's Metal objects into
# an arm64 Mach-O dylib with ld64.lld against the SDK's .tbd stubs.
#
# Usage: SDK=/path/to/MacOSX14.2.sdk tools/metal_sdk_check.sh
#   SDK        a macOS SDK directory (System/Library/Frameworks/Metal.framework,
#              usr/include/c++/v1). Unset, or not an SDK: prints "skipped", exits 0.
#   MACOS_MIN  deployment target (default 13.0, as CMakeLists.txt pins for Metal).
#   OUT        where the objects and the dylib go (default: a temporary directory).
#   CXX, LD64, NM  the tools (default: clang++, ld64.lld, llvm-nm; -14 suffixes tried).
# Exit: 0 every file compiled without a warning and the link worked (or skipped),
#       1 a compile error or warning, or a link failure; 2 a tool is missing.
# docs/METAL.md ("Checking the host against the macOS SDK") has the last result.
#
# What this sees: that the Objective-C++ and C++ parse and type-check against
# Apple's real Metal, Foundation, libc++ and libSystem headers (ARC rules,
# availability attributes at the deployment target, the project's warnings),
# that they compile to arm64 Mach-O, and that every Metal, Foundation and
# Objective-C runtime symbol they use is exported by the SDK's stubs.
# What it cannot see: anything at run time (whether a call does what the code
# assumes, Metal's validation layer, errors a device reports), the GPU itself,
# the MSL (Apple's `metal` compiler and the metallib step are not run: the
# kernels' MSL is checked only by SPIRV-Cross and the Msl.* tests), code
# behind `#if` for SDKs newer than the one given (e.g. macOS 15's mathMode),
# and symbols from stubs the SDK lacks (reported, never silently passed).
# The compiler is Debian's clang, not Apple's: Apple clang may warn differently.
set -euo pipefail

if [[ -z "${SDK:-}" ]]; then
  echo "metal_sdk_check: skipped (SDK is not set; SDK=/path/to/MacOSX<ver>.sdk)"
  exit 0
fi
if [[ ! -f "$SDK/System/Library/Frameworks/Metal.framework/Headers/Metal.h" ||
      ! -d "$SDK/usr/include/c++/v1" ]]; then
  echo "metal_sdk_check: skipped ($SDK is not a macOS SDK with Metal.framework and libc++ headers)"
  exit 0
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MACOS_MIN=${MACOS_MIN:-13.0}

find_tool() {  # first of the names given that is on PATH or in /usr/lib/llvm-*/bin
  local name dir
  for name in "$@"; do
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
    for dir in /usr/lib/llvm-*/bin; do
      if [[ -x "$dir/$name" ]]; then echo "$dir/$name"; return 0; fi
    done
  done
  return 1
}
CXX=${CXX:-$(find_tool clang++ clang++-14 || true)}
LD64=${LD64:-$(find_tool ld64.lld ld64.lld-14 || true)}
NM=${NM:-$(find_tool llvm-nm llvm-nm-14 || true)}
for tool in CXX LD64 NM; do
  if [[ -z "${!tool}" ]]; then
    echo "metal_sdk_check: no $tool (clang++, ld64.lld from Debian's lld, llvm-nm)" >&2
    exit 2
  fi
done

# The SDK's version: SDKSettings.json, else the directory's name.
SDK_VERSION=unknown
if [[ -f "$SDK/SDKSettings.json" ]]; then
  SDK_VERSION=$(sed -n 's/.*"Version" *: *"\([0-9.]*\)".*/\1/p' "$SDK/SDKSettings.json" | head -n1)
fi
if [[ "$SDK_VERSION" == unknown || -z "$SDK_VERSION" ]]; then
  SDK_VERSION=$(basename "$SDK" | sed -n 's/^MacOSX\([0-9.]*\)\.sdk$/\1/p')
  SDK_VERSION=${SDK_VERSION:-unknown}
fi
SDK_LINK_VERSION=$SDK_VERSION
[[ "$SDK_LINK_VERSION" =~ ^[0-9]+(\.[0-9]+)*$ ]] || SDK_LINK_VERSION=$MACOS_MIN

# The project's warnings, read from CMakeLists.txt so the two cannot drift.
read -r -a WARNINGS <<<"$(sed -n 's/^set(MINFER_WARNINGS \(.*\))$/\1/p' "$ROOT/CMakeLists.txt")"
if [[ ${#WARNINGS[@]} -eq 0 ]]; then
  echo "metal_sdk_check: cannot read MINFER_WARNINGS from CMakeLists.txt" >&2
  exit 2
fi

OUT=${OUT:-$(mktemp -d /tmp/metal_sdk_check.XXXXXX)}
mkdir -p "$OUT"
# Third-party headers the files include (header-only nlohmann_json; SPIRV-Cross
# for the MSL generator), taken from the host without the rest of /usr/include,
# which must not mix with the SDK's.
THIRD="$OUT/third_party_include"
mkdir -p "$THIRD"
for dir in nlohmann spirv_cross; do
  [[ -d /usr/include/$dir ]] && ln -sfn "/usr/include/$dir" "$THIRD/$dir"
done

# What a Metal build defines (CMakeLists.txt: MINFER_METAL and MINFER_MSL on;
# MINFER_METALLIB_PATH where Xcode's metal compiler made a metallib).
COMMON=(-std=c++20 -O2 -target "arm64-apple-macos$MACOS_MIN" -isysroot "$SDK"
        -stdlib=libc++ -nostdinc++ -isystem "$SDK/usr/include/c++/v1" -isystem "$THIRD"
        -I "$ROOT/src" -DMINFER_HAS_METAL=1 -DMINFER_HAS_MSL=1 -DMINFER_HAS_SHADER_KERNELS=1
        "-DMINFER_SOURCE_DIR=\"$ROOT\"" "${WARNINGS[@]}")
OBJCXX=(-x objective-c++ -fobjc-arc)

echo "metal_sdk_check: SDK $SDK (macOS SDK $SDK_VERSION), target arm64-apple-macos$MACOS_MIN"
echo "metal_sdk_check: $("$CXX" --version | head -n1)"
failed=0
link_objects=()
for src in "$ROOT"/src/backend/metal/*.mm "$ROOT"/src/backend/metal/*.cpp; do
  name=$(basename "$src")
  obj="$OUT/$name.o"
  flags=("${COMMON[@]}")
  case "$name" in
    *.mm) flags=("${OBJCXX[@]}" "${flags[@]}") ;;
  esac
  [[ "$name" == metal_pipelines.mm ]] && flags+=("-DMINFER_METALLIB_PATH=\"/nonexistent/minfer.metallib\"")
  log="$OUT/$name.log"
  if "$CXX" "${flags[@]}" -c "$src" -o "$obj" >"$log" 2>&1; then rc=0; else rc=$?; fi
  warnings=$(grep -c 'warning:' "$log" || true)
  errors=$(grep -c 'error:' "$log" || true)
  if [[ $rc -ne 0 || $warnings -ne 0 ]]; then
    echo "  FAIL $name: $errors error(s), $warnings warning(s)"
    sed 's/^/    /' "$log"
    failed=1
    continue
  fi
  echo "  ok   $name (compiled: $(file -b "$obj" | cut -d, -f1))"
  # The generator and the translator link SPIRV-Cross, which no SDK has; the
  # rest is the engine's Metal code.
  case "$name" in
    msl_gen_main.cpp | msl_translate.cpp) ;;
    *) link_objects+=("$obj") ;;
  esac
done
if [[ $failed -ne 0 ]]; then
  echo "metal_sdk_check: FAILED (compile)"
  exit 1
fi

# The link: a dylib of the engine's Metal objects against the SDK's stubs.
# Symbols the rest of minfer_core defines (mangled in namespace minfer) are
# allowed undefined; every other symbol must come from a stub.
LINK=(-arch arm64 -platform_version macos "$MACOS_MIN" "$SDK_LINK_VERSION" -syslibroot "$SDK"
      -dylib -install_name @rpath/libminfer_metal_check.dylib --error-limit=0
      -framework Metal -framework Foundation -lobjc)
missing_stubs=()
if compgen -G "$SDK/usr/lib/libc++*.tbd" >/dev/null; then LINK+=(-lc++); else missing_stubs+=(libc++); fi
if compgen -G "$SDK/usr/lib/libSystem*.tbd" >/dev/null; then LINK+=(-lSystem); else missing_stubs+=(libSystem); fi

"$NM" -j -u "${link_objects[@]}" 2>/dev/null | grep -v ':$' | sort -u >"$OUT/undefined.txt"
"$NM" -j --defined-only "${link_objects[@]}" 2>/dev/null | grep -v ':$' | sort -u >"$OUT/defined.txt"
comm -23 "$OUT/undefined.txt" "$OUT/defined.txt" | grep '6minfer' >"$OUT/own.txt" || true
allow=()
while read -r sym; do allow+=(-U "$sym"); done <"$OUT/own.txt"

dylib="$OUT/libminfer_metal_check.dylib"
run_link() {  # run_link LOG EXTRA_ALLOWED...
  local log=$1
  shift
  "$LD64" "${LINK[@]}" "${allow[@]}" "$@" "${link_objects[@]}" -o "$dylib" >"$log" 2>&1
}

absent=()
if ! run_link "$OUT/link1.log"; then
  # With stubs missing from the SDK, the symbols only they could give are
  # named and allowed; any other unresolved symbol (Metal, Foundation, the
  # Objective-C runtime) is a failure.
  sed -n 's/.*undefined symbol: \(.*\)$/\1/p' "$OUT/link1.log" | sort -u >"$OUT/unresolved.txt"
  other=$(grep -c -v 'undefined symbol:\|^>>>\|^$' "$OUT/link1.log" || true)
  unexplained=()
  while read -r sym; do
    if [[ "$sym" =~ ^(_OBJC_|_objc_|_MTL|_NS[A-Z]|_CF|_kCF) ]]; then
      unexplained+=("$sym")
    elif [[ "$sym" =~ ^___is(Platform|OS)VersionAtLeast$ ]]; then
      # @available's runtime check lives in clang's darwin builtins
      # (libclang_rt.osx.a), which come with Apple's toolchain, not the SDK.
      absent+=("$sym")
    elif [[ " ${missing_stubs[*]} " == *" libc++ "* &&
            "$sym" =~ ^(__ZNSt3__1|__ZNKSt3__1|__ZSt|__ZNSt|__ZTISt|__ZTVN10__cxxabiv1|__Znwm|__Znam|__ZdlPv|__ZdaPv|___cxa_|___gxx_personality) ]]; then
      absent+=("$sym")
    elif [[ " ${missing_stubs[*]} " == *" libSystem "* ]]; then
      absent+=("$sym")
    else
      unexplained+=("$sym")
    fi
  done <"$OUT/unresolved.txt"
  if [[ ${#unexplained[@]} -ne 0 || $other -ne 0 ]]; then
    echo "  FAIL link (the whole log: $OUT/link1.log):"
    grep -v 'undefined symbol:\|^>>>\|^$' "$OUT/link1.log" | sed 's/^/    /' || true
    [[ ${#unexplained[@]} -ne 0 ]] && printf '    unresolved: %s\n' "${unexplained[@]}"
    echo "metal_sdk_check: FAILED (link)"
    exit 1
  fi
  extra=()
  for sym in "${absent[@]}"; do extra+=(-U "$sym"); done
  # The lazy-binding helper the linker itself asks of libSystem.
  [[ " ${missing_stubs[*]} " == *" libSystem "* ]] && extra+=(-U dyld_stub_binder)
  if ! run_link "$OUT/link2.log" "${extra[@]}"; then
    echo "  FAIL link:"
    sed 's/^/    /' "$OUT/link2.log"
    echo "metal_sdk_check: FAILED (link)"
    exit 1
  fi
fi

echo "  ok   link: $(file -b "$dylib" | cut -d, -f1) from ${#link_objects[@]} objects"
OTOOL=$(find_tool llvm-otool llvm-otool-14 || true)
if [[ -n "$OTOOL" ]]; then
  echo "       links: $("$OTOOL" -L "$dylib" | tail -n +2 | sed -n 's/^[[:space:]]*\(\/[^ ]*\).*/\1/p' | tr '\n' ' ')"
fi
echo "       $(wc -l <"$OUT/own.txt") minfer symbols left to the rest of minfer_core"
if [[ ${#absent[@]} -ne 0 ]]; then
  echo "       not checked: ${#absent[@]} symbols that stubs the SDK lacks (${missing_stubs[*]:-none}) or clang_rt.osx would give:"
  printf '         %s\n' "${absent[@]:0:12}"
  [[ ${#absent[@]} -gt 12 ]] && echo "         ... (all in $OUT/unresolved.txt)"
fi
if [[ ${#absent[@]} -ne 0 ]]; then
  echo "metal_sdk_check: OK, link partial: ${#absent[@]} symbols not checked (objects and dylib in $OUT)"
else
  echo "metal_sdk_check: OK (objects and dylib in $OUT)"
fi
