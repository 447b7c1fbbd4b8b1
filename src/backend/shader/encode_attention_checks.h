// The attention encoders' shared checks, refusing what both attention
// kernels cannot take (encode_attention.h's contract): defined in
// encode_attention.cpp, used there and by encode_attention_tiled.cpp.
#pragma once

#include "backend/shader/device.h"
#include "backend/shader/encode_attention.h"
#include "base/status.h"

namespace minfer::shader::detail {

// Sizes positive, GQA whole, head_dim even and within the kernels' limit,
// the window, 32-bit indices, and the page geometry when paged.
Status check_attention(const AttentionShape& s);

// The K and V cache regions' types and sizes (a Q8_0 region needs head_dim
// a multiple of 32; regions within 32-bit byte offsets).
Status check_attention_regions(const AttentionShape& s);

// Every binding against the shape: q, out (not overlapping q), positions,
// the cache regions, the error words, the sinks when given (n_head floats),
// and the page tables when paged (not given otherwise).
Status check_attention_bindings(const BufferRange& q, const BufferRange& positions,
                                const BufferRange& seq_slots, const BufferRange& page_table,
                                const BufferRange& k_cache, const BufferRange& v_cache,
                                const BufferRange& sinks, const BufferRange& out,
                                const BufferRange& err, const AttentionShape& s);

// The bindings both attention kernels take, in their manifests' order:
// unused ones (the page tables when not paged, the sinks when none) bound
// to the positions again, never read.
struct AttentionBindings {
  BufferRange ranges[9];
};
AttentionBindings attention_bindings(const BufferRange& q, const BufferRange& positions,
                                     const BufferRange& seq_slots, const BufferRange& page_table,
                                     const BufferRange& k_cache, const BufferRange& v_cache,
                                     const BufferRange& sinks, const BufferRange& out,
                                     const BufferRange& err, const AttentionShape& s);

}  // namespace minfer::shader::detail
