# The GPU kernels: every kernels/<kernel>.manifest names the push-constant
# struct, workgroup size, bindings and variants of kernels/<kernel>.comp (or
# of its `source`). Each variant is compiled by glslc (GLSL 450 -> SPIR-V for
# Vulkan 1.2, -O) with WG_X/WG_Y/WG_Z and the variant's defines, validated by
# spirv-val, and all of them are embedded into one generated source
# (embed_spirv.cmake, run by CMake itself: the build needs no Python).
#
# Manifest lines (`#` starts a comment; one directive per line):
#   args       <Struct>|none          push constants (a struct of kernel_args.h)
#   workgroup  <x> <y> <z>            local size
#   bindings   <name>:<r|w|rw|atomic> ... storage buffers 0, 1, ... in order
#                                     (atomic: updated by atomics only, never a hazard)
#   variant    <name> [DEFINE[=V]...] one SPIR-V module each
#   source     <file.comp>            optional; default <kernel>.comp
#   flags      test                   optional: a test-only kernel
#
# Included from the top-level CMakeLists.txt when a GPU backend is built, with
# MINFER_GLSLC and MINFER_SPIRV_VAL set; defines MINFER_SHADER_EMBEDDED_SOURCE.

set(MINFER_SHADER_DIR ${CMAKE_CURRENT_SOURCE_DIR}/src/backend/shader)
set(MINFER_SHADER_OUT ${CMAKE_BINARY_DIR}/shader_kernels)
set(MINFER_SHADER_TARGET_ENV vulkan1.2)
file(MAKE_DIRECTORY ${MINFER_SHADER_OUT})
file(GLOB MINFER_SHADER_MANIFESTS CONFIGURE_DEPENDS ${MINFER_SHADER_DIR}/kernels/*.manifest)
list(SORT MINFER_SHADER_MANIFESTS)
file(GLOB MINFER_SHADER_INCLUDES CONFIGURE_DEPENDS ${MINFER_SHADER_DIR}/kernels/*.glsl)
file(GLOB MINFER_SHADER_ARG_HEADERS CONFIGURE_DEPENDS ${MINFER_SHADER_DIR}/kernel_args*.h)
# The error codes, shared with the CUDA kernels (kernel_args.h includes them as
# "backend/device_errors.h", found through -I<src>).
set(MINFER_SHADER_SRC_ROOT ${CMAKE_CURRENT_SOURCE_DIR}/src)
list(APPEND MINFER_SHADER_INCLUDES ${MINFER_SHADER_ARG_HEADERS}
     ${MINFER_SHADER_SRC_ROOT}/backend/device_errors.h)

# Reads one manifest into variables prefixed with `prefix`_.
function(minfer_read_shader_manifest manifest prefix)
  get_filename_component(kernel ${manifest} NAME_WE)
  set(source ${kernel}.comp)
  set(args "")
  set(workgroup "")
  set(bindings "")
  set(variants "")
  set(flags "")
  file(STRINGS ${manifest} lines)
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "#.*$" "" line "${line}")
    string(STRIP "${line}" line)
    if(line STREQUAL "")
      continue()
    endif()
    separate_arguments(words UNIX_COMMAND "${line}")
    list(POP_FRONT words key)
    if(key STREQUAL "args" OR key STREQUAL "source")
      set(${key} ${words})
    elseif(key STREQUAL "workgroup" OR key STREQUAL "bindings" OR key STREQUAL "flags")
      set(${key} ${words})
    elseif(key STREQUAL "variant")
      list(POP_FRONT words variant)
      list(APPEND variants ${variant})
      set(${prefix}_defines_${variant} ${words} PARENT_SCOPE)
    else()
      message(FATAL_ERROR "${manifest}: unknown directive '${key}'")
    endif()
  endforeach()
  list(LENGTH workgroup n_wg)
  if(NOT args OR NOT n_wg EQUAL 3 OR NOT bindings OR NOT variants)
    message(FATAL_ERROR "${manifest}: needs `args`, `workgroup x y z`, `bindings` and a `variant`")
  endif()
  foreach(b IN LISTS bindings)
    if(NOT b MATCHES "^[a-z_0-9]+:(r|w|rw|atomic)$")
      message(FATAL_ERROR "${manifest}: binding '${b}' is not <name>:<r|w|rw|atomic>")
    endif()
  endforeach()
  foreach(v kernel source args workgroup bindings variants flags)
    set(${prefix}_${v} "${${v}}" PARENT_SCOPE)
  endforeach()
endfunction()

set(MINFER_SHADER_SPIRV "")
set(MINFER_SHADER_LIST "")
foreach(manifest IN LISTS MINFER_SHADER_MANIFESTS)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${manifest})
  minfer_read_shader_manifest(${manifest} m)
  set(src ${MINFER_SHADER_DIR}/kernels/${m_source})
  list(GET m_workgroup 0 wg_x)
  list(GET m_workgroup 1 wg_y)
  list(GET m_workgroup 2 wg_z)
  set(test_only 0)
  if("test" IN_LIST m_flags)
    set(test_only 1)
  endif()
  string(REPLACE ";" "," bindings_csv "${m_bindings}")
  foreach(variant IN LISTS m_variants)
    set(spv ${MINFER_SHADER_OUT}/${m_kernel}.${variant}.spv)
    set(defines -DWG_X=${wg_x} -DWG_Y=${wg_y} -DWG_Z=${wg_z})
    foreach(d IN LISTS m_defines_${variant})
      list(APPEND defines -D${d})
    endforeach()
    add_custom_command(
      OUTPUT ${spv}
      COMMAND ${MINFER_GLSLC} --target-env=${MINFER_SHADER_TARGET_ENV} -O -fshader-stage=compute
              -I${MINFER_SHADER_SRC_ROOT} -I${MINFER_SHADER_DIR} -I${MINFER_SHADER_DIR}/kernels
              ${defines}
              -MD -MF ${spv}.d -MT ${spv} -o ${spv}.tmp ${src}
      COMMAND ${MINFER_SPIRV_VAL} --target-env ${MINFER_SHADER_TARGET_ENV} ${spv}.tmp
      COMMAND ${CMAKE_COMMAND} -E rename ${spv}.tmp ${spv}
      DEPENDS ${src} ${manifest} ${MINFER_SHADER_INCLUDES}
      DEPFILE ${spv}.d
      COMMENT "GLSL ${m_kernel}.${variant} -> SPIR-V"
      VERBATIM)
    list(APPEND MINFER_SHADER_SPIRV ${spv})
    # kernel|variant|source|x,y,z|bindings|args|test_only|spv
    string(APPEND MINFER_SHADER_LIST
           "${m_kernel}|${variant}|${m_source}|${wg_x},${wg_y},${wg_z}|${bindings_csv}|${m_args}|${test_only}|${spv}\n")
  endforeach()
endforeach()

set(MINFER_SHADER_LIST_FILE ${MINFER_SHADER_OUT}/kernels.list)
file(CONFIGURE OUTPUT ${MINFER_SHADER_LIST_FILE} CONTENT "${MINFER_SHADER_LIST}" @ONLY)
set(MINFER_SHADER_EMBEDDED_SOURCE ${MINFER_SHADER_OUT}/embedded_kernels.cpp)
add_custom_command(
  OUTPUT ${MINFER_SHADER_EMBEDDED_SOURCE}
  COMMAND ${CMAKE_COMMAND} -DLIST=${MINFER_SHADER_LIST_FILE} -DOUT=${MINFER_SHADER_EMBEDDED_SOURCE}
          -P ${MINFER_SHADER_DIR}/embed_spirv.cmake
  DEPENDS ${MINFER_SHADER_SPIRV} ${MINFER_SHADER_LIST_FILE} ${MINFER_SHADER_DIR}/embed_spirv.cmake
  COMMENT "Embedding the SPIR-V kernels"
  VERBATIM)
