# MSL from the GPU kernels: every SPIR-V module kernels.cmake builds is
# translated by minfer_msl_gen (SPIRV-Cross, msl_translate.h) into
# shader_kernels/msl/<kernel>.<variant>.metal plus its ABI sidecar .json, on
# every platform (the tests check them: tests/backend/msl_test.cpp). Metal
# builds also embed them (MINFER_MSL_EMBEDDED_SOURCE) and, where Xcode's
# `metal` compiler is found, compile them into shader_kernels/minfer.metallib,
# which the Metal device loads instead of compiling the sources at startup.
#
# Included from the top-level CMakeLists.txt after kernels.cmake when
# MINFER_MSL is on; defines the target minfer_msl_kernels, the library
# minfer_msl (the translator, for the tests), MINFER_MSL_DIR and
# MINFER_MSL_EMBEDDED_SOURCE (Metal builds).

set(MINFER_METAL_DIR ${CMAKE_CURRENT_SOURCE_DIR}/src/backend/metal)
set(MINFER_MSL_DIR ${MINFER_SHADER_OUT}/msl)
file(MAKE_DIRECTORY ${MINFER_MSL_DIR})
set(MINFER_SPIRV_CROSS_LIBS spirv-cross-msl spirv-cross-glsl spirv-cross-core)

# The generator builds from its own objects (not minfer_core, which embeds
# its output in Metal builds).
add_executable(minfer_msl_gen ${MINFER_METAL_DIR}/msl_gen_main.cpp ${MINFER_METAL_DIR}/msl_abi.cpp
               ${MINFER_METAL_DIR}/msl_translate.cpp ${CMAKE_CURRENT_SOURCE_DIR}/src/base/status.cpp
               ${CMAKE_CURRENT_SOURCE_DIR}/src/base/json.cpp ${CMAKE_CURRENT_SOURCE_DIR}/src/base/utf8.cpp)
target_include_directories(minfer_msl_gen PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_compile_options(minfer_msl_gen PRIVATE ${MINFER_WARNINGS})
target_link_libraries(minfer_msl_gen PRIVATE ${MINFER_SPIRV_CROSS_LIBS} nlohmann_json::nlohmann_json)

set(MINFER_MSL_OUTPUTS "")
set(MINFER_MSL_SOURCES "")
foreach(spv IN LISTS MINFER_SHADER_SPIRV)
  get_filename_component(label ${spv} NAME_WLE)
  list(APPEND MINFER_MSL_SOURCES ${MINFER_MSL_DIR}/${label}.metal)
  list(APPEND MINFER_MSL_OUTPUTS ${MINFER_MSL_DIR}/${label}.metal ${MINFER_MSL_DIR}/${label}.json)
endforeach()
set(embed_arg "")
if(MINFER_METAL)
  set(MINFER_MSL_EMBEDDED_SOURCE ${MINFER_MSL_DIR}/embedded_msl.cpp)
  set(embed_arg ${MINFER_MSL_EMBEDDED_SOURCE})
  list(APPEND MINFER_MSL_OUTPUTS ${MINFER_MSL_EMBEDDED_SOURCE})
endif()
add_custom_command(
  OUTPUT ${MINFER_MSL_OUTPUTS}
  COMMAND minfer_msl_gen ${MINFER_SHADER_LIST_FILE} ${MINFER_MSL_DIR} ${embed_arg}
  DEPENDS minfer_msl_gen ${MINFER_SHADER_SPIRV} ${MINFER_SHADER_LIST_FILE}
  COMMENT "SPIR-V -> MSL (SPIRV-Cross), with ABI sidecars"
  VERBATIM)
set(msl_targets ${MINFER_MSL_OUTPUTS})

# Xcode's compiler, when present: one AIR file per kernel, one library. Without
# fast math (on by default in `metal`, as in MTLCompileOptions): the kernels'
# -inf/NaN handling and exact arithmetic need IEEE semantics (metal_pipelines.mm,
# ieee_compile_options, does the same for the sources compiled at startup).
if(MINFER_METAL)
  find_program(MINFER_XCRUN xcrun)
  if(MINFER_XCRUN)
    execute_process(COMMAND ${MINFER_XCRUN} -sdk macosx -f metal OUTPUT_VARIABLE metal_cc
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE metal_rc)
  endif()
  if(MINFER_XCRUN AND metal_rc EQUAL 0)
    set(air_files "")
    foreach(src IN LISTS MINFER_MSL_SOURCES)
      get_filename_component(label ${src} NAME_WLE)
      set(air ${MINFER_MSL_DIR}/${label}.air)
      add_custom_command(
        OUTPUT ${air}
        COMMAND ${MINFER_XCRUN} -sdk macosx metal -std=macos-metal2.3
                -mmacosx-version-min=${CMAKE_OSX_DEPLOYMENT_TARGET} -fno-fast-math -O2 -c ${src}
                -o ${air}
        DEPENDS ${src}
        COMMENT "MSL ${label} -> AIR"
        VERBATIM)
      list(APPEND air_files ${air})
    endforeach()
    set(MINFER_METALLIB ${MINFER_SHADER_OUT}/minfer.metallib)
    add_custom_command(
      OUTPUT ${MINFER_METALLIB}
      COMMAND ${MINFER_XCRUN} -sdk macosx metallib ${air_files} -o ${MINFER_METALLIB}
      DEPENDS ${air_files}
      COMMENT "Linking minfer.metallib"
      VERBATIM)
    list(APPEND msl_targets ${MINFER_METALLIB})
  else()
    message(STATUS "minfer: no Xcode `metal` compiler; the Metal kernels compile at startup")
  endif()
endif()
add_custom_target(minfer_msl_kernels ALL DEPENDS ${msl_targets})

# The translator as a library, for the tests that translate again.
add_library(minfer_msl STATIC ${MINFER_METAL_DIR}/msl_translate.cpp)
target_include_directories(minfer_msl PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src)
target_compile_options(minfer_msl PRIVATE ${MINFER_WARNINGS})
target_link_libraries(minfer_msl PUBLIC minfer_core ${MINFER_SPIRV_CROSS_LIBS})
