#pragma once
// The names device regions go by, for code that must not need the CUDA headers.
namespace wpk::cuda {

constexpr const char* kRegionOp = "CudaRegion";  // domain com.wpk; attribute "body": the region's graph
// A region's attribute "disabled_variants" lists those of these that disabled_kernels leaves out.
constexpr const char* kCublasLtVariant = "cublaslt";            // products on cuBLASLt with the epilogue inside
constexpr const char* kCudnnGraphVariant = "cudnn_fused_graph";  // convolutions as cuDNN operation graphs

}  // namespace wpk::cuda
