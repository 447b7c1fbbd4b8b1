#!/bin/bash
# Nsight Compute detail (throughput, occupancy, stall reasons) for the first
# decode GEMV kernels of a model: the evidence behind the GEMV notes in
# docs/CUDA.md.
#   bash tools/cuda_gemv_ncu.sh MINFER_BINARY MODEL OUT_DIR [COUNT]
set -u
bin=$1
model=$2
out=$3
count=${4:-6}
command -v ncu > /dev/null || { echo "ncu not found"; exit 0; }
mkdir -p "$out"
ncu --clock-control none -k regex:'q8_kernel' -c "$count" \
  --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
  "$bin" run -m "$model" -n 2 --temp 0 -p "Hello" > "$out/gemv_ncu.txt" 2> "$out/gemv_ncu.err"
grep -E "q8_kernel|Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Waves Per SM|Grid Size|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|Active Warps Per" "$out/gemv_ncu.txt" | head -200
