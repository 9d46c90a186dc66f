// wpk cache ls|clear|prune [--dir DIR]: the cache folder (default: where a Session puts it,
// SessionOptions::cache_dir's fallbacks). ls lists each tuning file per environment: entries,
// and whether they are this machine's or which other machine's, then the generated kernels in
// kernels/; clear removes wpk's files; prune keeps only what this wpk on this machine can use.
#include <cstdio>
#include <string>

#include "cli.hpp"
// Internal headers of libwpk that need only the standard library.
#include "codegen/jit/cubin_store.hpp"
#include "codegen/jit/kernel_store.hpp"
#include "runtime/cache_folder.hpp"
#include "runtime/kernel_compilation.hpp"
#include "runtime/tuning_db.hpp"

namespace wpk::cli {
namespace {

// "model=M;flags=F;cpus=N;compiler=C;format=V" as "M, N cpus, compiler C, format V, flags F";
// anything else as it is.
std::string readable(const std::string& key) {
  const char* marks[] = {"model=", ";flags=", ";cpus=", ";compiler=", ";format="};
  std::size_t at[5];
  std::size_t from = 0;
  for (int i = 0; i < 5; ++i) {
    at[i] = i == 4 ? key.rfind(marks[i]) : key.find(marks[i], from);
    if (at[i] == std::string::npos || at[i] < from || (i == 0 && at[i] != 0)) return key;
    from = at[i] + std::char_traits<char>::length(marks[i]);
  }
  auto field = [&](int i) {
    const std::size_t begin = at[i] + std::char_traits<char>::length(marks[i]);
    return key.substr(begin, (i == 4 ? key.size() : at[i + 1]) - begin);
  };
  return field(0) + ", " + field(2) + " cpus, compiler " + field(3) + ", format " + field(4) + ", flags " + field(1);
}

std::string whose(const CacheEnvironmentInfo& env) {
  if (env.current) return "this machine";
  if (env.description.empty()) return "another machine (env " + env.hash + ", not described)";
  return "another machine: " + readable(env.description);
}

void ls_kernels(const std::string& dir, const codegen::KernelFolderInfo& k, bool compiler_usable) {
  std::uintmax_t bytes = 0;
  std::size_t usable = 0;
  for (const codegen::StoredKernel& s : k.kernels) {
    bytes += s.bytes;
    usable += s.intact && s.current;
  }
  if (!k.kernels.empty())
    std::printf("%s  %zu generated kernels, %ju bytes of libraries  %zu for this compiler%s\n", kernel_folder(dir).c_str(),
                k.kernels.size(), bytes, usable,
                usable == k.kernels.size() ? ""
                : compiler_usable ? ", the others another compiler's or damaged (prune removes them)"
                                  : " (no compiler here: loads use the intact ones)");
  if (!k.orphans.empty()) std::printf("%s  %zu libraries no kernel names (prune removes them)\n", kernel_folder(dir).c_str(), k.orphans.size());
  if (!k.recipes.empty())
    std::printf("%s  %zu recipes (which kernel a generated source is, so warm loads print none)%s\n",
                kernel_folder(dir).c_str(), k.recipes.size(),
                k.stale_recipes.empty() ? "" : (", " + std::to_string(k.stale_recipes.size()) +
                                                " of another build of wpk or naming no kernel (prune removes them)").c_str());
  for (const std::string& p : k.leftovers) std::printf("%s  left over from an interrupted compile (clear removes it)\n", p.c_str());
}

int ls(const std::string& dir) {
  const CacheFolderInfo info = inspect_cache_folder(dir);
  const codegen::HostCompiler compiler = codegen::find_host_compiler();
  const codegen::KernelFolderInfo kernels = codegen::inspect_kernel_folder(kernel_folder(dir), compiler.identity);
  const codegen::CubinFolderInfo cubins = codegen::inspect_cubin_folder(cuda_kernel_folder(dir));
  if (info.files.empty() && info.leftovers.empty() && kernels.kernels.empty() && kernels.orphans.empty() &&
      kernels.leftovers.empty() && kernels.recipes.empty() && cubins.entries + cubins.damaged == 0) {
    std::printf("cache folder %s is empty%s\n", dir.c_str(), info.exists ? "" : " (it does not exist)");
    return 0;
  }
  std::printf("cache folder %s\n", dir.c_str());
  for (const CacheFileInfo& f : info.files) {
    const std::string head = f.path + "  " + std::to_string(f.bytes) + " bytes  ";
    const std::string unused = f.current_format ? "" : "  [format " + (f.format < 0 ? std::string("?") : std::to_string(f.format)) +
                                                           ": unused by this wpk, prune removes it]";
    if (f.environments.empty()) std::printf("%s0 entries%s\n", head.c_str(), unused.c_str());
    for (const CacheEnvironmentInfo& env : f.environments)
      std::printf("%s%zu entries  %s%s\n", head.c_str(), env.entries, whose(env).c_str(), unused.c_str());
    if (f.damaged) std::printf("%s%zu damaged lines (ignored)\n", head.c_str(), f.damaged);
  }
  for (const std::string& p : info.leftovers)
    std::printf("%s  left over from an interrupted write (clear removes it)\n", p.c_str());
  ls_kernels(dir, kernels, compiler.usable());
  if (cubins.entries + cubins.damaged)
    std::printf("%s  %zu CUDA kernels, %ju bytes%s\n", cuda_kernel_folder(dir).c_str(), cubins.entries, cubins.bytes,
                cubins.damaged ? (", " + std::to_string(cubins.damaged) + " damaged (prune removes them)").c_str() : "");
  return 0;
}

void print_removed(const CacheRemoval& done) {
  for (const std::string& p : done.files) std::printf("removed %s\n", p.c_str());
  for (const CacheEnvironmentInfo& env : done.environments)
    std::printf("removed %zu entries of %s from %s\n", env.entries, whose(env).c_str(), done.rewritten.c_str());
  if (done.damaged) std::printf("removed %zu damaged lines from %s\n", done.damaged, done.rewritten.c_str());
  if (!done.rewritten.empty()) std::printf("kept %zu entries of this machine in %s\n", done.kept, done.rewritten.c_str());
}

}  // namespace

int cmd_cache(int argc, char** argv) {
  int actions = 0;  // before parse_args, whose complaint would be about a MODEL
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir") ++i;
    else if (a.rfind("--", 0) != 0) ++actions;
  }
  if (actions != 1) throw Error(ErrorCode::InvalidArgument, "wpk cache needs one of ls, clear, prune");
  const Args args = parse_args(argc, argv, 2, {}, {"--dir"});
  const std::string action = args.positional[0];
  if (args.has("--dir") && args.get("--dir", "").empty()) throw Error(ErrorCode::InvalidArgument, "--dir needs a folder");
  const std::string dir = resolve_cache_dir(args.get("--dir", ""));
  if (dir.empty()) throw Error(ErrorCode::InvalidArgument, "no cache folder: pass --dir, or set WPK_CACHE_DIR or HOME");
  if (action == "ls") return ls(dir);
  if (action != "clear" && action != "prune")
    throw Error(ErrorCode::InvalidArgument, "unknown cache action '" + action + "' (ls, clear, prune)");
  const CacheRemoval done = action == "clear" ? clear_cache_folder(dir) : prune_cache_folder(dir);
  // Without a compiler every stored kernel is "another compiler's", yet a load here can still use
  // them and could not rebuild them: prune keeps them then.
  const codegen::HostCompiler compiler = codegen::find_host_compiler();
  if (action == "prune" && !compiler.usable())
    std::printf("kept the generated kernels: no compiler here to tell which are current (%s)\n", compiler.why_unusable.c_str());
  const std::vector<std::string> kernels =
      action == "clear"     ? codegen::clear_kernel_folder(kernel_folder(dir))
      : compiler.usable()   ? codegen::prune_kernel_folder(kernel_folder(dir), compiler.identity)
                            : std::vector<std::string>{};
  const std::vector<std::string> cubins = action == "clear" ? codegen::clear_cubin_folder(cuda_kernel_folder(dir))
                                                            : codegen::prune_cubin_folder(cuda_kernel_folder(dir));
  for (const std::string& p : cubins) std::printf("removed %s\n", p.c_str());
  if (done.nothing() && kernels.empty() && cubins.empty()) std::printf("nothing to %s in %s\n", action.c_str(), dir.c_str());
  print_removed(done);
  for (const std::string& p : kernels) std::printf("removed %s\n", p.c_str());
  return 0;
}

}  // namespace wpk::cli
