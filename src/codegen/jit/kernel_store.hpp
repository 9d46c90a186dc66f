#pragma once
// The compiled-kernel store: generated C++ compiled once per machine and kept in the cache
// folder (`<cache>/kernels/`), content-addressed by what the binary computes: the source, the
// flags, the target and the store's format. The entry records the compiler's identity (its
// `--version`): when the compiler at hand has another, the entry is compiled again; when no
// compiler runs, the entry serves as it is (a warm load needs no compiler). Each entry is a
// shared object named by its own checksum plus a small text file (`.meta`) that names it and
// carries its size and SHA-256; a missing, truncated, corrupt or foreign entry is compiled again
// and replaced, never loaded. Writes go to temporaries and are renamed into place, the object
// before the meta that names it, so a reader sees a whole entry or none, and two processes
// filling one store at once leave it consistent.
//
// A warm load need not print a kernel's source to find it: a kernel may come with a recipe (the
// few facts its generator prints the source from), and the store remembers, beside the entry, which
// entry a recipe printed under this build of wpk (codegen/jit/build_identity.hpp) gave. A recipe
// file (`.recipe`) names the entry's key; the entry is verified as any other before it loads.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/jit/host_compiler.hpp"

namespace wpk::codegen {

constexpr int kKernelStoreFormat = 2;

// Kernels that share a prelude, flags and target are compiled together, up to kKernelsPerUnit to
// a translation unit (the prelude once, then each source): their symbols must differ.
constexpr std::size_t kKernelsPerUnit = 8;

struct KernelSource {
  std::string name;     // the kernel's stable name, e.g. "f32_relu__avx512_v4": files and logs show it
  std::string symbol;   // its extern "C" entry point
  std::string prelude;  // includes and helpers the source needs
  std::string source;   // C++ text defining the entry point
  std::vector<std::string> flags;  // ISA flags (-mavx2 -mfma, -mavx512f ...)
  std::string target;  // what the flags target, e.g. "avx512": part of the key and of `wpk cache ls`
  std::string recipe;  // KernelRecipe::text when the kernel has one: the store remembers it
};

// What a generated kernel's source is printed from: with this build of wpk, equal recipes print
// equal sources (the generator's inputs: the op's shapes, the schedule's knobs, the target).
struct KernelRecipe {
  std::string name;  // the kernel's name, as KernelSource::name
  std::string text;
};

// A loaded kernel: its entry point stays valid while any copy of the handle lives.
struct LoadedKernel {
  std::shared_ptr<void> library;  // the dlopen handle
  void* entry = nullptr;
  std::string path;               // the shared object it came from
  bool compiled = false;          // compiled by this call (false: found in the store)
};

struct Obtained {
  std::shared_ptr<LoadedKernel> kernel;  // null when it could not be had
  std::string why;                       // set when kernel is null
  bool stopped = false;                  // not compiled because compiling was stopped (CompileStop)
};

class KernelStore {
 public:
  // `dir` is the store's folder, created when needed; "" (or a folder that cannot be created or
  // written) keeps compiled kernels for this process only, in a private temporary folder.
  KernelStore(std::string dir, HostCompiler compiler);
  ~KernelStore();
  KernelStore(const KernelStore&) = delete;
  KernelStore& operator=(const KernelStore&) = delete;

  // Every source's kernel: loaded from the store when a verified entry exists, else compiled (at
  // most `parallel` compilers at once, several kernels to a unit), stored and loaded. A unit that
  // fails is compiled again a kernel at a time, so an error names its kernel and costs only it.
  // With `compile` false, a source the store does not hold is left without a kernel. Once `stop`
  // is due, compilers are stopped and the sources not yet compiled are left without one.
  std::vector<Obtained> obtain(const std::vector<KernelSource>& sources, int parallel, bool compile = true,
                               const CompileStop& stop = {});
  // The kernel a source with this recipe was stored as, loaded, when a recipe file of this build
  // names an intact entry another compiler did not build (as obtain() would load it); else null:
  // then the source is printed and obtained. Never compiles.
  std::shared_ptr<LoadedKernel> recall(const KernelRecipe& recipe);

  // The content address of a source: 64 hex digits.
  std::string key_of(const KernelSource& s) const;

  const std::string& dir() const { return dir_; }
  bool persistent() const { return persistent_; }
  const HostCompiler& compiler() const { return compiler_; }
  std::string why_not_persistent() const { return why_not_persistent_; }

 private:
  struct PendingKernel {
    std::size_t index;  // into the sources
    std::string stem, key;
  };
  // Compiles the pending kernels (a unit that fails again one kernel at a time) into `out`.
  void compile_pending(const std::vector<KernelSource>& sources, const std::vector<PendingKernel>& pending, int parallel,
                       std::vector<Obtained>& out, const CompileStop& stop);
  void compile_units(const std::vector<KernelSource>& sources, const std::vector<PendingKernel>& pending,
                     const std::vector<std::vector<std::size_t>>& units, const std::string& work, int parallel,
                     std::vector<Obtained>& out, const CompileStop& stop);

  std::string dir_;
  bool persistent_ = false;
  std::string why_not_persistent_;
  HostCompiler compiler_;
};

// Kernels compiled and loaded from stores by this process (all stores), for `wpk bench --json`.
struct KernelStoreCounters {
  std::uint64_t compiled = 0, loaded = 0, rebuilt = 0;  // rebuilt: entries found damaged
  std::uint64_t recalled = 0;  // loaded by recipe (also counted in loaded)
};
KernelStoreCounters kernel_store_counters();

// ---- The store as a folder (`wpk cache ls|clear|prune`) ----

struct StoredKernel {
  std::string name, target, compiler, meta_path, library_path;
  std::uintmax_t bytes = 0;
  bool intact = false;   // meta well formed and the library's size and checksum match
  bool current = false;  // this store format and `current_compiler`'s identity
};

struct KernelFolderInfo {
  std::vector<StoredKernel> kernels;   // by name
  std::vector<std::string> orphans;    // shared objects no meta names
  std::vector<std::string> leftovers;  // temporaries of writes (.tmp.)
  std::vector<std::string> recipes;    // every recipe file
  std::vector<std::string> stale_recipes;  // of another build of wpk, damaged, or naming no current entry
};

// Read-only; a missing folder holds nothing.
KernelFolderInfo inspect_kernel_folder(const std::string& dir, const std::string& current_compiler);
// Removes every entry, orphan and leftover; returns the paths removed.
std::vector<std::string> clear_kernel_folder(const std::string& dir);
// Removes entries that are damaged or not current, orphans and stale recipes; leftovers stay (a
// running process may be writing them).
std::vector<std::string> prune_kernel_folder(const std::string& dir, const std::string& current_compiler);

}  // namespace wpk::codegen
