// The error words of backend/device_errors.h (MINFER_ERR_*, through
// kernel_args.h): a kernel that checks a device-side index defines
// MINFER_ERR_BINDING (its manifest names that binding with access `atomic`)
// and includes this after kernel_args.h.
// report_error keeps the first error only: word 0 goes from 0 to `code`
// once, and the winner writes the value and the bound.
layout(std430, binding = MINFER_ERR_BINDING) coherent buffer ErrorWords { uint err_words[]; };

void report_error(uint code, uint value, uint bound) {
  if (atomicCompSwap(err_words[0], 0u, code) == 0u) {
    err_words[1] = value;
    err_words[2] = bound;
  }
}
