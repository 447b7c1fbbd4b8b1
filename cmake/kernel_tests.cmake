# MINFER_KERNEL_TESTS_ONLY: the engine and the CLI compiled, but linked only
# into one test binary with the CPU kernel tests (tests/backend/*_test.cpp
# except the CUDA and Vulkan ones). Meant for cross builds (cmake/aarch64-linux-gnu.cmake),
# whose sysroot has libc and libstdc++ but not pcre2 or utf8proc: the one
# source that needs them, the pre-tokenizer, is left out (and the HTTP
# server, whose header-only libraries are the host's), and googletest is
# built from Debian's source package when no installed copy is found.
# Included from the top-level CMakeLists.txt, in its directory scope.

file(GLOB_RECURSE MINFER_SOURCES CONFIGURE_DEPENDS src/*.cpp)
list(FILTER MINFER_SOURCES EXCLUDE REGEX "src/cli/.*|src/serve/.*|src/grammar/.*|src/tokenizer/pretokenizer\\.cpp$")
# No Vulkan here (the target sysroot has no loader): its layers stay out, and
# so do the Metal backend's MSL tools and device glue (its policy stays: plain C++).
list(FILTER MINFER_SOURCES EXCLUDE REGEX "src/backend/(shader|vulkan)/.*")
list(FILTER MINFER_SOURCES EXCLUDE REGEX "src/backend/metal/(msl_.*|metal_backend)\\.cpp$")
add_library(minfer_core STATIC ${MINFER_SOURCES})
target_include_directories(minfer_core PUBLIC src)
target_compile_options(minfer_core PRIVATE ${MINFER_WARNINGS})
target_link_libraries(minfer_core PUBLIC Threads::Threads)
target_compile_definitions(minfer_core PUBLIC MINFER_SOURCE_DIR="${CMAKE_SOURCE_DIR}")

# The CLI is compiled (not linked: it needs the pre-tokenizer) so that the
# whole project is known to build for the target.
file(GLOB MINFER_CLI_SOURCES CONFIGURE_DEPENDS src/cli/*.cpp)
add_library(minfer_cli_objects OBJECT ${MINFER_CLI_SOURCES})
target_compile_options(minfer_cli_objects PRIVATE ${MINFER_WARNINGS})
target_link_libraries(minfer_cli_objects PRIVATE minfer_core)

if(NOT MINFER_TESTS)
  return()
endif()
enable_testing()
find_package(GTest QUIET)
if(NOT GTest_FOUND)
  set(MINFER_GTEST_SOURCE_DIR /usr/src/googletest CACHE PATH "googletest sources (Debian: libgtest-dev)")
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  add_subdirectory(${MINFER_GTEST_SOURCE_DIR} ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
  if(NOT TARGET GTest::gtest_main)
    add_library(GTest::gtest_main ALIAS gtest_main)
  endif()
endif()
include(GoogleTest)

file(GLOB MINFER_KERNEL_TESTS CONFIGURE_DEPENDS tests/backend/*_test.cpp)
list(FILTER MINFER_KERNEL_TESTS EXCLUDE REGEX "tests/backend/(cuda|vulkan)_[^/]*$")
# The kernels' thread pool lives in base/; its test comes along, and so does
# the op-conformance table (its rows and harness), run here on the CPU alone.
list(APPEND MINFER_KERNEL_TESTS tests/base/thread_pool_test.cpp)
file(GLOB MINFER_KERNEL_TEST_PARTS CONFIGURE_DEPENDS tests/backend/op_conformance_rows*.cpp
     tests/backend/op_conformance_testutil.cpp)
list(APPEND MINFER_KERNEL_TESTS ${MINFER_KERNEL_TEST_PARTS})
add_executable(minfer_kernel_test ${MINFER_KERNEL_TESTS})
target_compile_options(minfer_kernel_test PRIVATE ${MINFER_WARNINGS})
target_include_directories(minfer_kernel_test PRIVATE tests)
target_link_libraries(minfer_kernel_test PRIVATE minfer_core GTest::gtest_main)
# Under CMAKE_CROSSCOMPILING_EMULATOR, ctest runs the binary through qemu.
add_test(NAME minfer_kernel_test COMMAND minfer_kernel_test)
