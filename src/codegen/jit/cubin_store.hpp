#pragma once
// Compiled CUDA kernels on disk: each cubin in one file of the cache folder, named by the hash of
// everything that decides its bytes (the source, the architecture, NVRTC's version, the device
// and driver it is for, this format), its first line giving the payload's size and SHA-256.
// Written to a temporary file and renamed into place, so a reader sees a whole file or none and
// two processes filling one folder at once both end with a valid entry. A file that is truncated,
// damaged or of another format is compiled again and replaced, never loaded.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/jit/nvrtc_compiler.hpp"

namespace wpk::codegen {

class CubinStore {
 public:
  // `dir` "" keeps nothing on disk.
  explicit CubinStore(std::string dir);

  // The cubin of `source` for sm_`sm`: from the folder when a verified entry exists, else
  // compiled by `nvrtc` (null: none on this machine, an error if compiling is needed) and stored.
  // `device` names the device and driver the code is for (part of the key).
  std::string obtain(const Nvrtc* nvrtc, const std::string& source, const std::string& symbol, int sm,
                     const std::string& device);

  std::string key_of(const std::string& source, int sm, const std::string& nvrtc_version, const std::string& device) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

struct CubinCounters {
  std::uint64_t compiled = 0, loaded = 0, rebuilt = 0;  // rebuilt: entries found damaged
};
// This process's, over every store.
CubinCounters cubin_counters();

// `wpk cache ls`: the entries of a folder and their total bytes; damaged ones counted apart.
struct CubinFolderInfo {
  std::size_t entries = 0, damaged = 0;
  std::uintmax_t bytes = 0;
};
CubinFolderInfo inspect_cubin_folder(const std::string& dir);
// `wpk cache clear` removes every entry and temporary; `prune` the damaged entries. They return
// the paths removed.
std::vector<std::string> clear_cubin_folder(const std::string& dir);
std::vector<std::string> prune_cubin_folder(const std::string& dir);

}  // namespace wpk::codegen
