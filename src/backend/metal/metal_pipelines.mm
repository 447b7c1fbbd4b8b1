// The Metal kernel library and one compute pipeline per embedded kernel the
// device runs (metal_device.h): which kernels run is decided as on Vulkan
// (shader/kernel_states.h); each one's MSL sidecar is checked against the
// kernel table (msl_abi.h) before its function is looked up in the prebuilt
// minfer.metallib, or compiled from the embedded MSL when there is none.
#include <mach-o/dyld.h>

#include <string>
#include <vector>

#include "backend/metal/embedded_msl.h"
#include "backend/metal/metal_device_impl.h"
#include "backend/metal/metal_options.h"
#include "backend/metal/msl_abi.h"
#include "backend/shader/kernel_states.h"
#include "backend/shader/kernel_table.h"
#include "base/log.h"

namespace minfer::metal::detail {
namespace {

// minfer.metallib beside the running binary, else where the build put it.
std::vector<std::string> metallib_candidates(const Options& options) {
  if (!options.section<MetalOptions>().metallib_file.empty())
    return {options.section<MetalOptions>().metallib_file};
  std::vector<std::string> out;
  char path[4096];
  uint32_t size = sizeof(path);
  if (_NSGetExecutablePath(path, &size) == 0) {
    std::string dir(path);
    dir = dir.substr(0, dir.rfind('/') + 1);
    out.push_back(dir + "minfer.metallib");
  }
#ifdef MINFER_METALLIB_PATH
  out.push_back(MINFER_METALLIB_PATH);
#endif
  return out;
}

bool exists(const std::string& path) {
  return [[NSFileManager defaultManager]
      fileExistsAtPath:[NSString stringWithUTF8String:path.c_str()]];
}

// Options for compiling the embedded MSL: MSL 2.3 (macOS 11; the deployment
// target is pinned at 13.0 in CMakeLists.txt) and IEEE arithmetic. Metal
// compiles with fast math unless told not to (fastMathEnabled defaults to
// YES), which the kernels cannot take: argmax starts from -inf and skips NaN
// (argmax.comp), attention's numerics rely on exact products and a division
// refined on its exact remainder (attention_numerics.glsl), both of which fast
// math may fold or contract away. msl.cmake gives the offline compiler
// -fno-fast-math for the same reason.
MTLCompileOptions* ieee_compile_options() {
  MTLCompileOptions* o = [MTLCompileOptions new];
  o.languageVersion = MTLLanguageVersion2_3;
#if defined(__MAC_15_0) && __MAC_OS_X_VERSION_MAX_ALLOWED >= __MAC_15_0
  // macOS 15 SDKs: mathMode replaces fastMathEnabled (deprecated there).
  if (@available(macOS 15.0, *)) {
    o.mathMode = MTLMathModeSafe;
    o.mathFloatingPointFunctions = MTLMathFloatingPointFunctionsPrecise;
    return o;
  }
#endif
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
  o.fastMathEnabled = NO;
#pragma clang diagnostic pop
  return o;
}

}  // namespace

Result<id<MTLLibrary>> MetalDevice::prebuilt_library(const Options& options) const {
  for (const std::string& path : metallib_candidates(options)) {
    if (!exists(path)) {
      if (!options.section<MetalOptions>().metallib_file.empty()) {
        return Status::not_found("MINFER_METALLIB_FILE: no file " + path);
      }
      continue;
    }
    NSError* error = nil;
    NSURL* url = [NSURL fileURLWithPath:[NSString stringWithUTF8String:path.c_str()]];
    id<MTLLibrary> lib = [device_ newLibraryWithURL:url error:&error];
    if (lib == nil) {
      return Status::internal("Metal: cannot load " + path + ": " +
                              error_text(error, "no error given"));
    }
    log_info("Metal: kernels from " + path);
    return lib;
  }
  return id<MTLLibrary>(nil);
}

Result<id<MTLFunction>> MetalDevice::function_of(uint32_t index, id<MTLLibrary> prebuilt) const {
  const shader::KernelInfo& k = shader::embedded_kernels()[index];
  const EmbeddedMsl& msl = embedded_msl()[index];
  const std::string entry = msl_entry_point(k.name, k.variant);
  id<MTLLibrary> lib = prebuilt;
  if (lib == nil) {  // compile this kernel's MSL now
    NSError* error = nil;
    const std::string source = msl.source();
    lib = [device_ newLibraryWithSource:[NSString stringWithUTF8String:source.c_str()]
                                options:ieee_compile_options()
                                  error:&error];
    if (lib == nil) {
      return Status::internal("Metal: the MSL of " + k.label() +
                              " does not compile: " + error_text(error, "no error given"));
    }
  }
  id<MTLFunction> fn = [lib newFunctionWithName:[NSString stringWithUTF8String:entry.c_str()]];
  if (fn == nil) {
    return Status::internal("Metal: no function '" + entry + "' (kernel " + k.label() +
                            ") in the kernel library");
  }
  return fn;
}

Status MetalDevice::create_pipelines(const Options& options, const MetalOpenConfig& config) {
  const std::span<const shader::KernelInfo> table = shader::embedded_kernels();
  const std::span<const EmbeddedMsl> msl = embedded_msl();
  if (msl.size() != table.size()) {
    return Status::internal("Metal: " + std::to_string(msl.size()) + " MSL kernels for " +
                            std::to_string(table.size()) + " kernel table entries");
  }
  MINFER_ASSIGN_OR_RETURN(id<MTLLibrary> prebuilt, prebuilt_library(options));
  kernels_.resize(table.size());
  pipelines_.resize(table.size());
  bool width_known = false;
  for (uint32_t i = 0; i < table.size(); ++i) {
    const shader::KernelInfo& k = table[i];
    if (msl[i].label != k.label()) {
      return Status::internal("Metal: MSL entry " + std::string(msl[i].label) + " stands where " +
                              k.label() + " should");
    }
    MINFER_ASSIGN_OR_RETURN(kernels_[i], shader::assess_kernel(k, info_, config.test_kernels));
    if (!kernels_[i].available) continue;
    MINFER_ASSIGN_OR_RETURN(const MslSidecar sidecar, sidecar_from_json(msl[i].sidecar));
    MINFER_RETURN_IF_ERROR(check_sidecar(k, sidecar));
    MINFER_ASSIGN_OR_RETURN(id<MTLFunction> fn, function_of(i, prebuilt));
    NSError* error = nil;
    id<MTLComputePipelineState> p = [device_ newComputePipelineStateWithFunction:fn error:&error];
    if (p == nil) {
      return Status::internal("Metal: no pipeline for " + k.label() + ": " +
                              error_text(error, "no error given"));
    }
    if ([p maxTotalThreadsPerThreadgroup] < k.invocations() ||
        [p staticThreadgroupMemoryLength] > info_.limits.max_shared_memory_bytes) {
      kernels_[i].available = false;
      kernels_[i].unavailable_reason =
          "its pipeline takes " + std::to_string([p maxTotalThreadsPerThreadgroup]) +
          " threads per threadgroup and " + std::to_string([p staticThreadgroupMemoryLength]) +
          " bytes of threadgroup memory; it needs " + std::to_string(k.invocations()) +
          " and the device has " + std::to_string(info_.limits.max_shared_memory_bytes);
      continue;
    }
    if (!width_known) {
      info_.limits.subgroup_size = static_cast<uint32_t>([p threadExecutionWidth]);
      width_known = true;
    }
    pipelines_[i] = p;
  }
  return shader::check_every_kernel_has_a_variant(kernels_, info_.name);
}

}  // namespace minfer::metal::detail
