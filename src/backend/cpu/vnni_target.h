// The function attributes of the AVX-512 VNNI kernels (matmul_gemm_vnni.cpp,
// matmul_gemv_vnni.cpp): each function that uses those instructions carries
// MINFER_VNNI (or MINFER_VNNI_INLINE for helpers inlined into them), so the
// files build for the baseline ISA and run the code only where
// vnni_gemm_available() said yes. x86-64 only.
#pragma once

#define MINFER_VNNI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c")))
#define MINFER_VNNI_INLINE                                                         \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c"), \
                 always_inline)) inline
