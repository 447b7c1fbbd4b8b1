// Push-constant structs of the quant kernels: part of kernel_args.h (include
// that, not this), under its rules: 4-byte scalar members only, every offset
// and the size pinned by static_asserts on the C++ side.
#ifndef MINFER_BACKEND_SHADER_KERNEL_ARGS_QUANT_H_
#define MINFER_BACKEND_SHADER_KERNEL_ARGS_QUANT_H_

// get_rows.comp: out[i][:] = dequant(W[ids[i]]) * scale for i < n_ids, W
// [n_rows][row_len] in the variant's weight type, ids i32, out f32. Grid:
// n_ids * ceil(ceil(row_len / 8) / workgroup size) workgroups, folded over x
// and y; an id outside [0, n_rows) is reported as MINFER_ERR_ROW_ID.
struct GetRowsArgs {
  u32 n_rows;
  u32 row_len;
  u32 n_ids;
  f32 scale;
  // W's binding holds rows [first_row, first_row + range_rows) of the table:
  // ids outside it are another dispatch's (0 and n_rows: the whole table).
  u32 first_row;
  u32 range_rows;
};

#ifdef __cplusplus
static_assert(offsetof(GetRowsArgs, row_len) == 4 && offsetof(GetRowsArgs, n_ids) == 8 &&
              offsetof(GetRowsArgs, scale) == 12 && offsetof(GetRowsArgs, first_row) == 16 &&
              offsetof(GetRowsArgs, range_rows) == 20 && sizeof(GetRowsArgs) == 24);
#endif

#endif  // MINFER_BACKEND_SHADER_KERNEL_ARGS_QUANT_H_
