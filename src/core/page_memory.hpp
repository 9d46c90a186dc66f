#pragma once
// Zero-filled, 64-byte-aligned storage. Two kinds, for two lifetimes:
// - heap_zeroed: malloc's heap, for what a run allocates (outputs, temporaries): a block the
//   next run asks for again is reused warm, where fresh pages would fault in every run (~0.9 ms
//   per MB on these virtual machines).
// - long_lived_zeroed: big blocks straight from the kernel (mmap), for what lives as long as a
//   model: weights as loaded, folded and packed. Those are allocated, copied, packed and freed
//   in bulk at session load; from the heap the freed copies stayed resident (glibc returns heap
//   memory only from its top, and raises its mmap threshold up to 32 MB as big blocks are
//   freed): ResNet-50's peak RSS was ~40 MB above this at batch 1, ~80 MB at batch 8, BERT's
//   ~130 MB. Blocks of 2 MB and more are aligned to 2 MB and advised as transparent huge pages
//   before they are populated.
#include <cstddef>
#include <memory>

#include "wpk/tensor.hpp"

namespace wpk {

// Blocks of at least this many bytes are mapped pages in long_lived_zeroed, except under
// AddressSanitizer (the fuzz build), where every block comes from the heap it guards.
constexpr std::size_t kPageMemoryMinBytes = std::size_t(1) << 20;
#if defined(__SANITIZE_ADDRESS__)
#define WPK_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WPK_ADDRESS_SANITIZER 1
#endif
#endif
#ifdef WPK_ADDRESS_SANITIZER
constexpr bool kLongLivedUsesPages = false;
#else
constexpr bool kLongLivedUsesPages = true;
#endif

// `bytes` zero bytes (at least one), 64-byte aligned, freed when the last owner lets go.
// Both throw wpk::Error (InvalidArgument, "out of memory ...") when the system refuses.
std::shared_ptr<void> heap_zeroed(std::size_t bytes);
std::shared_ptr<void> long_lived_zeroed(std::size_t bytes);

// Tensor::zeros over long_lived_zeroed (defined beside it, in tensor.cpp): for initializers.
Tensor long_lived_zeros(DType dtype, Shape shape);

// Hands the heap's free pages back to the system (glibc's malloc_trim; nothing elsewhere). For
// after a load has freed weights that lived on the heap: the model's bytes as parsed, which the
// initializers keep (onnx_import), come from malloc, and glibc returns heap memory only from its
// top unless asked.
void return_free_heap_pages();

}  // namespace wpk
