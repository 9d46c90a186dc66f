#pragma once
// NVRTC, CUDA's in-process compiler, loaded at run time (dlopen of libnvrtc): libwpk links and
// runs where the CUDA toolkit is absent, and generated CUDA kernels (cuda_printer.hpp) compile to
// cubins where it is present, with or without a GPU. Where from: $WPK_NVRTC (a library path)
// when set, else the loader's search path, else /usr/local/cuda/lib64.
#include <cstdint>
#include <string>
#include <vector>

namespace wpk::codegen {

struct CubinResources {
  int registers = -1;             // per thread
  std::int64_t shared_bytes = -1; // static shared memory per block
  std::int64_t spill_bytes = -1;  // stores to local memory (register spills) per thread
  std::int64_t stack_bytes = -1;
};

struct CompiledCubin {
  std::string cubin;          // the ELF image for cuModuleLoadData
  std::string log;            // NVRTC's and ptxas's messages
  CubinResources resources;   // as ptxas reported them
};

// What one compute capability allows a kernel (the CUDA programming guide's tables).
struct CudaArchLimits {
  int registers_per_thread = 255;
  int registers_per_block = 65536;
  std::int64_t shared_bytes_per_block = 48 * 1024;  // static shared memory
};
CudaArchLimits cuda_arch_limits(int sm);

class Nvrtc {
 public:
  // The library, loaded once per process; null when it cannot be, with the reason in *why.
  static const Nvrtc* get(std::string* why = nullptr);
  std::string version() const;  // "13.0"
  // Architectures this NVRTC compiles for (sm_XX as XX).
  std::vector<int> architectures() const;
  // Compiles `source` for sm_`sm` (e.g. 90) into a cubin. Throws std::runtime_error with the
  // compiler's log when it fails.
  CompiledCubin compile(const std::string& source, const std::string& name, int sm) const;

  struct Api;
  explicit Nvrtc(const Api* api) : api_(api) {}

 private:
  const Api* api_;
};

// Reads ptxas's "Used N registers, M bytes smem, ..." and "S bytes spill stores" lines.
CubinResources parse_ptxas_resources(const std::string& log);
// The registers per thread the cubin's kernel uses, from its ELF notes (.nv.info's register-count
// record), for NVRTC releases whose log leaves ptxas's report out; -1 when it has none.
int cubin_register_count(const std::string& cubin);
// The static shared memory of the cubin's kernel (its .nv.shared sections; from sm_90 including
// the driver's reserved kilobyte); -1 when it is no ELF.
std::int64_t cubin_shared_bytes(const std::string& cubin);

}  // namespace wpk::codegen
