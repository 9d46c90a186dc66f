#pragma once
// The names device regions go by, for code that must not need the CUDA headers.
namespace wpk::cuda {

constexpr const char* kRegionOp = "CudaRegion";  // domain com.wpk; attribute "body": the region's graph

}  // namespace wpk::cuda
