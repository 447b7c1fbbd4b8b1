// Test only: each workgroup spins until flag[0] != 0 (the host never sets
// it) or max_iterations pass; workgroup 0 writes its count. A wait on it
// passes any short deadline, yet the device always finishes. One invocation
// per workgroup. lavapipe (llvmpipe) ends a shader's loops after 65535
// iterations in all, so there the count shows the cap and the test makes the
// work longer with more workgroups instead.
#version 450
#include "common.glsl"
#include "kernel_args.h"

layout(push_constant) uniform Push { SpinArgs args; };
layout(std430, binding = 0) volatile readonly buffer Flag { uint flag[]; };
layout(std430, binding = 1) writeonly buffer Count { uint count[]; };

void main() {
  uint done = 0u;
  while (done < args.max_iterations && flag[0] == 0u) ++done;
  if (folded_group_index() == 0u && gl_LocalInvocationIndex == 0u) count[0] = done;
}
