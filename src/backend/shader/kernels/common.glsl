// Included first by every kernel: the extensions all of them use and the
// workgroup size, which the build passes as WG_X/WG_Y/WG_Z from the kernel's
// manifest (`workgroup` line) so that the host table and the SPIR-V agree.
//
// Rules every kernel keeps (docs/GPU.md, "Kernel rules"):
//   - correct for any subgroup size (1..128): reductions go through
//     subgroupAdd and then a shared array with one slot per subgroup, sized
//     for the worst case (WG_X * WG_Y * WG_Z slots);
//   - bounds checked on every load and store (the grid is rounded up);
//   - no return before a barrier(): out-of-range invocations stay in the
//     control flow and their stores are predicated.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x = WG_X, local_size_y = WG_Y, local_size_z = WG_Z) in;

const uint kWorkgroupInvocations = WG_X * WG_Y * WG_Z;

// The workgroup's index in a grid folded over x and y (the host splits a
// count past maxComputeWorkGroupCount[0] into rows of the y dimension).
uint folded_group_index() {
  return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
}
