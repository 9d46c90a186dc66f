#include "codegen/jit/kernel_store.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <system_error>

#include "codegen/jit/build_identity.hpp"
#include "codegen/jit/file_version.hpp"
#include "codegen/jit/sha256.hpp"

namespace wpk::codegen {
namespace fs = std::filesystem;

namespace {

std::atomic<std::uint64_t> g_compiled{0}, g_loaded{0}, g_rebuilt{0}, g_recalled{0};

const char kMetaMagic[] = "wpk-kernel";
const char kRecipeMagic[] = "wpk-recipe";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Letters, digits and '_' only, at most 80 of them: a kernel name as part of a file name.
std::string file_safe(const std::string& name) {
  std::string out;
  for (char c : name.substr(0, 80))
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return out.empty() ? "kernel" : out;
}

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

// One line values: a newline in a compiler's identity would split the meta's fields.
std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  return s;
}

struct Meta {
  std::map<std::string, std::string> fields;
  bool well_formed = false;
};

// A meta (or, with kRecipeMagic, a recipe file) with its closing checksum line.
std::string meta_text(const std::vector<std::pair<std::string, std::string>>& fields, const char* magic = kMetaMagic) {
  std::string body = std::string(magic) + " " + std::to_string(kKernelStoreFormat) + "\n";
  for (const auto& f : fields) body += f.first + " " + one_line(f.second) + "\n";
  return body + "check " + sha256_hex(body) + "\n";
}

// The meta's fields when its first line, its field lines and its closing checksum line hold.
Meta read_meta(const std::string& path, const char* magic = kMetaMagic) {
  Meta meta;
  // One read of at most 64 KB (a warm load reads two small files per kernel).
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return meta;
  std::string text(64 * 1024 + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = read(fd, &text[got], text.size() - got);
    if (n > 0) got += static_cast<std::size_t>(n);
    else if (n == 0 || errno != EINTR) break;
  }
  close(fd);
  if (got > 64 * 1024) return meta;
  text.resize(got);
  const std::size_t check = text.rfind("check ");
  if (check == std::string::npos || (check > 0 && text[check - 1] != '\n')) return meta;
  std::string digest = text.substr(check + 6);
  if (!digest.empty() && digest.back() == '\n') digest.pop_back();
  if (digest != sha256_hex(text.substr(0, check))) return meta;
  std::istringstream lines(text.substr(0, check));
  std::string line;
  if (!std::getline(lines, line) || line != std::string(magic) + " " + std::to_string(kKernelStoreFormat))
    return meta;
  while (std::getline(lines, line)) {
    const std::size_t space = line.find(' ');
    if (space == std::string::npos) return meta;
    meta.fields[line.substr(0, space)] = line.substr(space + 1);
  }
  meta.well_formed = true;
  return meta;
}

std::string field(const Meta& m, const std::string& name) {
  const auto it = m.fields.find(name);
  return it == m.fields.end() ? "" : it->second;
}

// Digests computed once per process for each key (computed outside the lock: another thread's
// equal result may land first).
class DigestMemo {
 public:
  template <typename Compute>
  std::string get(const std::string& key, Compute compute) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (const auto it = known_.find(key); it != known_.end()) return it->second;
    }
    const std::string digest = compute();
    std::lock_guard<std::mutex> lock(mutex_);
    return known_.emplace(key, digest).first->second;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::string> known_;
};

// A file's checksum, computed once per process for each version of the file (its device,
// inode, size and modification time): the kernels of one compiled unit share one library, and
// a replaced entry is a new file (renamed into place), so it is hashed again.
std::string file_checksum(const std::string& path) {
  const std::string version = file_version(path);
  if (version.empty()) return "";
  const std::string id = path + "#" + version;
  static DigestMemo files;
  return files.get(id, [&] { return sha256_file(path); });
}

// The library the meta names (in the meta's folder), when its size and checksum match.
std::string verified_library(const Meta& m, const fs::path& folder) {
  const std::string file = field(m, "library");
  if (!m.well_formed || file.empty() || file.find('/') != std::string::npos) return "";
  const fs::path lib = folder / file;
  std::error_code ec;
  const std::uintmax_t bytes = fs::file_size(lib, ec);
  if (ec || std::to_string(bytes) != field(m, "bytes")) return "";
  if (file_checksum(lib.string()) != field(m, "sha256")) return "";
  return lib.string();
}

bool write_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp." + std::to_string(getpid()) + "." + std::to_string(std::rand());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

std::string make_private_folder() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/wpk-kernels-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  return mkdtemp(buf.data()) ? std::string(buf.data()) : "";
}

// The prelude's SHA-256, hashed once per process for each distinct prelude: every kernel of a
// target shares one, and it is most of a kernel's text.
std::string prelude_digest(const std::string& prelude) {
  static DigestMemo preludes;
  return preludes.get(prelude, [&] { return sha256_hex(prelude); });
}

// Loaded libraries by path, so sessions of one process share one dlopen (and one checksum pass).
std::mutex g_loaded_mutex;
std::map<std::string, std::weak_ptr<LoadedKernel>> g_loaded_kernels;

std::shared_ptr<LoadedKernel> load(const std::string& path, const std::string& symbol, bool compiled, std::string& why) {
  // The file's identity, not its name: a rebuilt entry may reuse the name of a damaged one.
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    why = "cannot load '" + path + "': it is gone";
    return nullptr;
  }
  const std::string id = path + "#" + symbol + "#" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  std::lock_guard<std::mutex> lock(g_loaded_mutex);
  if (auto known = g_loaded_kernels[id].lock()) return known;
  // RTLD_NODELETE: a kernel's library (and the OpenMP runtime it may bring in) stays mapped after
  // its last user: OpenMP's idle worker threads must not outlive the code they were made for.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle) {
    const char* e = dlerror();
    why = "cannot load '" + path + "': " + (e ? e : "dlopen failed");
    return nullptr;
  }
  void* entry = dlsym(handle, symbol.c_str());
  if (!entry) {
    dlclose(handle);
    why = "'" + path + "' has no entry point '" + symbol + "'";
    return nullptr;
  }
  auto k = std::make_shared<LoadedKernel>();
  k->library = std::shared_ptr<void>(handle, [](void* h) { dlclose(h); });
  k->entry = entry;
  k->path = path;
  k->compiled = compiled;
  g_loaded_kernels[id] = k;
  return k;
}

// The library of an entry's meta that may serve `key`: verified, and not built by another
// compiler than the one at hand (it is replaced when that one runs; without a compiler it
// serves). "" otherwise.
std::string servable_library(const Meta& meta, const std::string& key, const fs::path& folder,
                             const HostCompiler& compiler) {
  const std::string lib = field(meta, "key") == key ? verified_library(meta, folder) : "";
  const bool other_compiler = compiler.usable() && field(meta, "compiler") != compiler.identity;
  return other_compiler ? "" : lib;
}

// An entry's files are named by the kernel's name and its key.
std::string entry_stem(const std::string& name, const std::string& key) { return file_safe(name) + "-" + key.substr(0, 24); }

bool is_key(const std::string& key) {
  return key.size() == 64 && std::all_of(key.begin(), key.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// A recipe's file in the folder, named by the recipe and the build that printed it; "" when this
// build has no identity (nothing is remembered then).
std::string recipe_path(const fs::path& folder, const std::string& name, const std::string& text) {
  const std::string& build = build_identity();
  if (build.empty()) return "";
  Sha256 h;
  for (const std::string& part : {std::string(kRecipeMagic), std::to_string(kKernelStoreFormat), build, name, text}) {
    h.update(std::to_string(part.size()) + ":");
    h.update(part);
  }
  return (folder / (file_safe(name) + "-r" + h.hex().substr(0, 24) + ".recipe")).string();
}

// Records that `s`'s recipe printed the source stored under `key`, unless the file says so already.
void remember_recipe(const fs::path& folder, const KernelSource& s, const std::string& key) {
  if (s.recipe.empty()) return;
  const std::string path = recipe_path(folder, s.name, s.recipe);
  if (path.empty()) return;
  std::error_code ec;
  if (fs::exists(path, ec) && field(read_meta(path, kRecipeMagic), "key") == key) return;
  write_atomically(path, meta_text({{"name", s.name}, {"build", build_identity()}, {"key", key}}, kRecipeMagic));
}

}  // namespace

KernelStoreCounters kernel_store_counters() {
  return {g_compiled.load(), g_loaded.load(), g_rebuilt.load(), g_recalled.load()};
}

KernelStore::KernelStore(std::string dir, HostCompiler compiler) : dir_(std::move(dir)), compiler_(std::move(compiler)) {
  if (!dir_.empty()) {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    const std::string probe = dir_ + "/.write-test." + std::to_string(getpid());
    std::ofstream test(probe);
    persistent_ = !ec && static_cast<bool>(test);
    test.close();
    fs::remove(probe, ec);
    if (!persistent_) why_not_persistent_ = "cannot write to kernel folder '" + dir_ + "'";
  } else {
    why_not_persistent_ = "no kernel folder";
  }
  if (!persistent_) dir_ = make_private_folder();
}

KernelStore::~KernelStore() {
  // A private folder's libraries are mapped by the kernels still loaded: removing the files
  // leaves the mappings, as unlinking an open file does.
  if (!persistent_ && !dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::string KernelStore::key_of(const KernelSource& s) const {
  Sha256 h;
  for (const std::string& part : {std::string(kMetaMagic), std::to_string(kKernelStoreFormat),
                                  join(base_compile_flags()), join(s.flags), s.target, s.symbol, prelude_digest(s.prelude),
                                  s.source}) {
    h.update(std::to_string(part.size()) + ":");
    h.update(part);
  }
  return h.hex();
}

void KernelStore::compile_units(const std::vector<KernelSource>& sources, const std::vector<PendingKernel>& pending,
                                const std::vector<std::vector<std::size_t>>& units, const std::string& work, int parallel,
                                std::vector<Obtained>& out, const CompileStop& stop) {
  const fs::path folder(dir_);
  std::vector<CompileJob> jobs;
  std::vector<std::string> temps;
  for (const auto& unit : units) {
    const KernelSource& first = sources[pending[unit.front()].index];
    std::string text = "// " + std::to_string(unit.size()) + " kernels generated by wpk, compiled together\n" + first.prelude;
    for (std::size_t j : unit) text += "\n" + sources[pending[j].index].source;
    // A fixed source name in a private folder: the object's bytes do not depend on a random path.
    const std::string stem = "unit-" + sha256_hex(text).substr(0, 24);
    const std::string src = work + "/" + stem + ".cpp";
    std::ofstream(src, std::ios::binary) << text;
    temps.push_back((folder / (stem + ".so.tmp." + std::to_string(getpid()) + "." + std::to_string(std::rand()))).string());
    jobs.push_back({src, temps.back(), first.flags, work});
  }
  const std::vector<CompileOutcome> outcomes = compile_shared_objects(compiler_, jobs, std::max(1, parallel), 300, stop);
  for (std::size_t u = 0; u < units.size(); ++u) {
    std::error_code ec;
    const std::string& temp = temps[u];
    if (!outcomes[u].ok) {
      fs::remove(temp, ec);
      for (std::size_t j : units[u]) {
        out[pending[j].index].why = "'" + sources[pending[j].index].name + "' did not compile: " + outcomes[u].log;
        out[pending[j].index].stopped = outcomes[u].stopped;
      }
      continue;
    }
    g_compiled += units[u].size();
    const std::string sum = sha256_file(temp);
    const std::uintmax_t bytes = fs::file_size(temp, ec);
    const std::string lib_name = fs::path(jobs[u].source_path).stem().string() + "-" + sum.substr(0, 16) + ".so";
    fs::rename(temp, folder / lib_name, ec);
    if (sum.empty() || ec) {
      fs::remove(temp, ec);
      for (std::size_t j : units[u]) out[pending[j].index].why = "cannot store kernels in '" + dir_ + "'";
      continue;
    }
    for (std::size_t j : units[u]) {
      const PendingKernel& p = pending[j];
      const KernelSource& s = sources[p.index];
      const std::string text = meta_text({{"name", s.name},
                                          {"symbol", s.symbol},
                                          {"key", p.key},
                                          {"library", lib_name},
                                          {"bytes", std::to_string(bytes)},
                                          {"sha256", sum},
                                          {"target", s.target},
                                          {"compiler", compiler_.identity},
                                          {"flags", join(s.flags)}});
      // Loaded before the meta names it: a prune meanwhile (which removes unnamed objects) cannot
      // take it from under this process. A meta that cannot be written costs the next process a
      // compile, not this one its kernel.
      // A library this process cannot load (a store on a noexec mount) gets no meta: the next
      // process would verify it, fail to load it and compile it again every time.
      out[p.index].kernel = load((folder / lib_name).string(), s.symbol, true, out[p.index].why);
      if (out[p.index].kernel && write_atomically(folder / (p.stem + ".meta"), text)) remember_recipe(folder, s, p.key);
    }
  }
}

std::shared_ptr<LoadedKernel> KernelStore::recall(const KernelRecipe& recipe) {
  if (dir_.empty()) return nullptr;
  const fs::path folder(dir_);
  const std::string path = recipe_path(folder, recipe.name, recipe.text);
  std::error_code ec;
  if (path.empty() || !fs::exists(path, ec)) return nullptr;
  const Meta remembered = read_meta(path, kRecipeMagic);
  const std::string key = field(remembered, "key");
  if (!is_key(key) || field(remembered, "name") != recipe.name || field(remembered, "build") != build_identity())
    return nullptr;
  const Meta meta = read_meta((folder / (entry_stem(recipe.name, key) + ".meta")).string());
  const std::string lib = servable_library(meta, key, folder, compiler_);
  if (lib.empty()) return nullptr;
  std::string why;
  std::shared_ptr<LoadedKernel> kernel = load(lib, field(meta, "symbol"), false, why);
  if (kernel) {
    ++g_loaded;
    ++g_recalled;
  }
  return kernel;
}

std::vector<Obtained> KernelStore::obtain(const std::vector<KernelSource>& sources, int parallel, bool compile,
                                          const CompileStop& stop) {
  std::vector<Obtained> out(sources.size());
  if (dir_.empty()) {
    for (Obtained& o : out) o.why = "no folder to compile kernels into";
    return out;
  }
  const fs::path folder(dir_);
  std::vector<PendingKernel> pending;
  // A source equal to an earlier one of the batch (two recipes may print one source) takes its result.
  std::map<std::string, std::size_t> first_of_key;
  struct Repeat {
    std::size_t index, earlier;  // the source, and the earlier equal one
    std::string key;
  };
  std::vector<Repeat> repeats;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const KernelSource& s = sources[i];
    const std::string key = key_of(s);
    if (const auto [it, fresh] = first_of_key.emplace(key, i); !fresh) {
      repeats.push_back({i, it->second, key});
      continue;
    }
    const std::string stem = entry_stem(s.name, key);
    const fs::path meta_path = folder / (stem + ".meta");
    std::error_code ec;
    if (fs::exists(meta_path, ec)) {
      const std::string lib = servable_library(read_meta(meta_path.string()), key, folder, compiler_);
      if (!lib.empty()) {
        out[i].kernel = load(lib, s.symbol, false, out[i].why);
        if (out[i].kernel) {
          ++g_loaded;
          remember_recipe(folder, s, key);
          continue;
        }
      }
      ++g_rebuilt;  // damaged, foreign or unloadable: compiled again and replaced
    }
    pending.push_back({i, stem, key});
  }
  if (compile)
    compile_pending(sources, pending, parallel, out, stop);
  else
    for (const PendingKernel& p : pending) out[p.index].why = "not in the kernel store, and not compiled here";
  for (const Repeat& r : repeats) {
    out[r.index] = out[r.earlier];
    if (out[r.index].kernel) remember_recipe(folder, sources[r.index], r.key);
  }
  return out;
}

void KernelStore::compile_pending(const std::vector<KernelSource>& sources, const std::vector<PendingKernel>& pending,
                                  int parallel, std::vector<Obtained>& out, const CompileStop& stop) {
  if (pending.empty()) return;
  if (!compiler_.usable()) {
    for (const PendingKernel& p : pending) out[p.index].why = "not compiled: " + compiler_.why_unusable;
    return;
  }
  const std::string work = make_private_folder();
  if (work.empty()) {
    for (const PendingKernel& p : pending) out[p.index].why = "cannot create a temporary folder to compile in";
    return;
  }
  // Kernels of one prelude and flags compile together, several to a translation unit: the
  // prelude's headers are parsed once per unit instead of once per kernel. At least `parallel`
  // units when there are that many kernels, so every compiler slot has work.
  std::vector<std::vector<std::size_t>> units;  // indices into `pending`
  {
    std::vector<std::vector<std::size_t>> groups;
    for (std::size_t j = 0; j < pending.size(); ++j) {
      const KernelSource& s = sources[pending[j].index];
      auto same = [&](const std::vector<std::size_t>& g) {
        const KernelSource& t = sources[pending[g.front()].index];
        return t.prelude == s.prelude && t.flags == s.flags && t.target == s.target;
      };
      auto g = std::find_if(groups.begin(), groups.end(), same);
      if (g == groups.end()) groups.push_back({j});
      else g->push_back(j);
    }
    const std::size_t width = static_cast<std::size_t>(std::max(1, parallel));
    for (const auto& g : groups) {
      const std::size_t count = std::max<std::size_t>((g.size() + kKernelsPerUnit - 1) / kKernelsPerUnit,
                                                      std::min(width, g.size()));
      for (std::size_t u = 0; u < count; ++u) {
        std::vector<std::size_t> unit;
        for (std::size_t m = u; m < g.size(); m += count) unit.push_back(g[m]);
        units.push_back(unit);
      }
    }
  }
  compile_units(sources, pending, units, work, parallel, out, stop);
  // A unit that failed is compiled again a kernel at a time: one kernel's error costs only it.
  std::vector<std::vector<std::size_t>> singles;
  for (const auto& unit : units)
    if (unit.size() > 1 && !out[pending[unit.front()].index].kernel)
      for (std::size_t j : unit) singles.push_back({j});
  if (!singles.empty() && !stop.due()) compile_units(sources, pending, singles, work, parallel, out, stop);
  std::error_code ec;
  fs::remove_all(work, ec);
}

KernelFolderInfo inspect_kernel_folder(const std::string& dir, const std::string& current_compiler) {
  KernelFolderInfo info;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return info;
  std::vector<std::string> libraries;
  std::vector<std::string> named;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.find(".tmp.") != std::string::npos) {
      info.leftovers.push_back(it->path().string());
    } else if (ends_with(name, ".so")) {
      libraries.push_back(it->path().string());
    } else if (ends_with(name, ".recipe")) {
      info.recipes.push_back(it->path().string());
    } else if (ends_with(name, ".meta")) {
      const Meta meta = read_meta(it->path().string());
      StoredKernel k;
      k.meta_path = it->path().string();
      k.name = meta.well_formed ? field(meta, "name") : name;
      k.target = field(meta, "target");
      k.compiler = field(meta, "compiler");
      k.library_path = verified_library(meta, dir);
      k.intact = !k.library_path.empty();
      if (k.intact) {
        k.bytes = fs::file_size(k.library_path, ec);
        named.push_back(k.library_path);
      } else if (meta.well_formed && !field(meta, "library").empty()) {
        named.push_back((fs::path(dir) / field(meta, "library")).string());  // damaged, not orphaned
      }
      k.current = k.intact && k.compiler == current_compiler;
      info.kernels.push_back(k);
    }
  }
  for (const std::string& lib : libraries)
    if (std::find(named.begin(), named.end(), lib) == named.end()) info.orphans.push_back(lib);
  for (const std::string& path : info.recipes) {
    const Meta recipe = read_meta(path, kRecipeMagic);
    const std::string key = field(recipe, "key");
    const std::string entry = is_key(key) ? (fs::path(dir) / (entry_stem(field(recipe, "name"), key) + ".meta")).string() : "";
    const bool names_intact = std::any_of(info.kernels.begin(), info.kernels.end(),
                                          [&](const StoredKernel& k) { return k.intact && k.meta_path == entry; });
    if (!recipe.well_formed || field(recipe, "build") != build_identity() || !names_intact)
      info.stale_recipes.push_back(path);
  }
  std::sort(info.recipes.begin(), info.recipes.end());
  std::sort(info.stale_recipes.begin(), info.stale_recipes.end());
  std::sort(info.kernels.begin(), info.kernels.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::sort(info.orphans.begin(), info.orphans.end());
  std::sort(info.leftovers.begin(), info.leftovers.end());
  return info;
}

namespace {
void remove_into(const std::string& path, std::vector<std::string>& removed) {
  std::error_code ec;
  if (!path.empty() && fs::remove(path, ec)) removed.push_back(path);
}
}  // namespace

std::vector<std::string> clear_kernel_folder(const std::string& dir) {
  std::vector<std::string> removed;
  const KernelFolderInfo info = inspect_kernel_folder(dir, "");
  for (const StoredKernel& k : info.kernels) {
    remove_into(k.meta_path, removed);
    remove_into(k.library_path, removed);
  }
  for (const std::string& p : info.orphans) remove_into(p, removed);
  for (const std::string& p : info.leftovers) remove_into(p, removed);
  for (const std::string& p : info.recipes) remove_into(p, removed);
  // The remembered compiler identities (host_compiler.hpp).
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("compiler-", 0) == 0 && ends_with(name, ".id")) remove_into(it->path().string(), removed);
  }
  // Libraries of damaged entries are orphans now.
  for (const std::string& p : inspect_kernel_folder(dir, "").orphans) remove_into(p, removed);
  return removed;
}

std::vector<std::string> prune_kernel_folder(const std::string& dir, const std::string& current_compiler) {
  std::vector<std::string> removed;
  for (const StoredKernel& k : inspect_kernel_folder(dir, current_compiler).kernels) {
    if (k.current) continue;
    remove_into(k.meta_path, removed);
    remove_into(k.library_path, removed);
  }
  const KernelFolderInfo left = inspect_kernel_folder(dir, current_compiler);
  for (const std::string& p : left.orphans) remove_into(p, removed);
  for (const std::string& p : left.stale_recipes) remove_into(p, removed);
  return removed;
}

}  // namespace wpk::codegen
