// The compiled-kernel store: content addresses, reuse across stores (processes), damaged and
// foreign entries rebuilt, no compiler, compile errors, concurrent fills, and the folder tools.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "codegen/jit/build_identity.hpp"
#include "codegen/jit/kernel_store.hpp"
#include "codegen/jit/sha256.hpp"
#include "support/env_override.hpp"

namespace wpk::codegen {
namespace {
namespace fs = std::filesystem;

KernelSource adder(int addend) {
  const std::string symbol = "add_" + std::to_string(addend);
  return {"f32_add" + std::to_string(addend) + "__scalar", symbol, "#include <cmath>\n",
          "extern \"C\" float " + symbol + "(float x) { return x + " + std::to_string(addend) + ".0f; }\n", {}, "scalar",
          "add " + std::to_string(addend)};
}

KernelRecipe recipe_of(const KernelSource& s) { return {s.name, s.recipe}; }

float call(const Obtained& o, float x) { return reinterpret_cast<float (*)(float)>(o.kernel->entry)(x); }

struct TempFolder {
  fs::path path;
  TempFolder() {
    char pattern[] = "/tmp/wpk-store-test-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::vector<fs::path> files_ending(const fs::path& dir, const std::string& tail) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.size() >= tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0) out.push_back(e.path());
  }
  return out;
}

TEST_CASE("SHA-256 gives the standard digests", "[codegen][store]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex(std::string(1000, 'a')) == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST_CASE("a stored kernel is loaded, not compiled, by the next store on the folder", "[codegen][store]") {
  TempFolder dir;
  const HostCompiler cxx = find_host_compiler();
  REQUIRE(cxx.usable());
  const KernelStoreCounters before = kernel_store_counters();
  {
    KernelStore store(dir.path.string(), cxx);
    CHECK(store.persistent());
    const auto got = store.obtain({adder(1), adder(2), adder(3)}, 2);
    for (int i = 0; i < 3; ++i) {
      REQUIRE(got[i].kernel);
      CHECK(got[i].kernel->compiled);
      CHECK(call(got[i], 1.0f) == 2.0f + i);
    }
  }
  CHECK(kernel_store_counters().compiled - before.compiled == 3);
  // A later process finds them: nothing compiles, even with a compiler that cannot run.
  KernelStore warm(dir.path.string(), probe_host_compiler("/bin/false"));
  CHECK_FALSE(warm.compiler().usable());
  const auto again = warm.obtain({adder(1), adder(2), adder(3)}, 2);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(again[i].kernel);
    CHECK(call(again[i], 1.0f) == 2.0f + i);
  }
  CHECK(kernel_store_counters().compiled - before.compiled == 3);
  // One it has not seen is left out with the reason.
  const auto cold = warm.obtain({adder(4)}, 1);
  CHECK_FALSE(cold[0].kernel);
  CHECK_THAT(cold[0].why, Catch::Contains("not compiled") && Catch::Contains("/bin/false"));
}

TEST_CASE("a stored kernel is recalled by its recipe without its source", "[codegen][store]") {
  TempFolder dir;
  const HostCompiler cxx = find_host_compiler();
  REQUIRE(cxx.usable());
  REQUIRE_FALSE(build_identity().empty());  // tests are linked with a build ID, as wpk is
  {
    KernelStore store(dir.path.string(), cxx);
    CHECK_FALSE(store.recall(recipe_of(adder(1))));  // nothing stored yet
    REQUIRE(store.obtain({adder(1), adder(2)}, 2)[0].kernel);
  }
  CHECK(files_ending(dir.path, ".recipe").size() == 2);
  const KernelStoreCounters before = kernel_store_counters();
  KernelStore warm(dir.path.string(), probe_host_compiler("/bin/false"));
  const std::shared_ptr<LoadedKernel> one = warm.recall(recipe_of(adder(1)));
  REQUIRE(one);
  CHECK(reinterpret_cast<float (*)(float)>(one->entry)(1.0f) == 2.0f);
  CHECK(kernel_store_counters().recalled - before.recalled == 1);
  // Another recipe, or the same text under another kernel's name, is not this kernel.
  CHECK_FALSE(warm.recall({adder(1).name, "add 7"}));
  CHECK_FALSE(warm.recall({adder(2).name, adder(1).recipe}));

  SECTION("a damaged recipe file is not followed, and obtaining by source writes it again") {
    for (const fs::path& p : files_ending(dir.path, ".recipe")) std::ofstream(p, std::ios::trunc) << "wpk-recipe 2\nkey 0\n";
    CHECK_FALSE(warm.recall(recipe_of(adder(2))));
    REQUIRE(warm.obtain({adder(2)}, 1)[0].kernel);
    CHECK(warm.recall(recipe_of(adder(2))));
  }
  SECTION("a recipe whose entry is gone or damaged recalls nothing") {
    for (const fs::path& p : files_ending(dir.path, ".meta")) fs::remove(p);
    CHECK_FALSE(warm.recall(recipe_of(adder(2))));
  }
  SECTION("a recipe naming another compiler's entry recalls nothing where that compiler is not at hand") {
    KernelStore other(dir.path.string(), probe_host_compiler("/bin/echo"));  // prints another identity
    REQUIRE(other.compiler().usable());
    CHECK_FALSE(other.recall(recipe_of(adder(2))));
  }
  SECTION("the folder tools count recipes, prune the stale ones and clear all") {
    const KernelFolderInfo info = inspect_kernel_folder(dir.path.string(), cxx.identity);
    CHECK(info.recipes.size() == 2);
    CHECK(info.stale_recipes.empty());
    fs::remove(files_ending(dir.path, ".meta").front());
    const KernelFolderInfo damaged = inspect_kernel_folder(dir.path.string(), cxx.identity);
    CHECK(damaged.stale_recipes.size() == 1);
    prune_kernel_folder(dir.path.string(), cxx.identity);
    CHECK(files_ending(dir.path, ".recipe").size() == 1);
    clear_kernel_folder(dir.path.string());
    CHECK(files_ending(dir.path, ".recipe").empty());
  }
}

TEST_CASE("the compiler's identity is remembered in the folder while its files stay as they were", "[codegen][store]") {
  TempFolder dir;
  const HostCompiler probed = find_host_compiler();
  REQUIRE(probed.usable());
  const HostCompiler first = find_host_compiler(dir.path.string());
  CHECK(first.identity == probed.identity);
  const std::vector<fs::path> files = files_ending(dir.path, ".id");
  REQUIRE(files.size() == 1);
  CHECK(find_host_compiler(dir.path.string()).identity == probed.identity);  // read back
  // A file whose fingerprint no longer matches (the compiler was replaced) is probed again and
  // rewritten; an identity is never taken from it then.
  std::ofstream(files[0], std::ios::trunc) << "/usr/bin/elsewhere:1:2:3:4;\nsome other compiler 9.9\n";
  CHECK(find_host_compiler(dir.path.string()).identity == probed.identity);
  std::ifstream again(files[0]);
  std::string fingerprint, identity;
  std::getline(again, fingerprint);
  std::getline(again, identity);
  CHECK(identity == probed.identity);
  // A command with a word that is no executable file is probed, and nothing is remembered for it.
  TempFolder other;
  {
    const wpk::testing::EnvOverride failing("WPK_CXX", "/bin/sh -c false");
    CHECK_FALSE(find_host_compiler(other.path.string()).usable());
  }
  CHECK(files_ending(other.path, ".id").empty());
  clear_kernel_folder(dir.path.string());
  CHECK(files_ending(dir.path, ".id").empty());
}

TEST_CASE("two recipes printing one source share one compiled kernel", "[codegen][store]") {
  TempFolder dir;
  KernelStore store(dir.path.string(), find_host_compiler());
  KernelSource twin = adder(3);
  twin.recipe = "add 3, said another way";
  const KernelStoreCounters before = kernel_store_counters();
  const auto got = store.obtain({adder(3), twin}, 2);
  REQUIRE(got[0].kernel);
  REQUIRE(got[1].kernel);
  CHECK(got[0].kernel->entry == got[1].kernel->entry);
  CHECK(kernel_store_counters().compiled - before.compiled == 1);
  CHECK(store.recall(recipe_of(twin)));
}

TEST_CASE("the key changes with the source, the flags and the target", "[codegen][store]") {
  KernelStore a("", find_host_compiler());
  const KernelSource base = adder(1);
  KernelSource flags = base, target = base, source = base;
  flags.flags = {"-mavx2"};
  target.target = "avx2";
  source.source += "// another line\n";
  const std::string k = a.key_of(base);
  CHECK(k.size() == 64);
  CHECK(a.key_of(flags) != k);
  CHECK(a.key_of(target) != k);
  CHECK(a.key_of(source) != k);
  CHECK(a.key_of(base) == k);
}

TEST_CASE("truncated, corrupt and foreign entries are compiled again, never loaded", "[codegen][store]") {
  TempFolder dir;
  const HostCompiler cxx = find_host_compiler();
  KernelStore store(dir.path.string(), cxx);
  REQUIRE(store.obtain({adder(5)}, 1)[0].kernel);
  const fs::path meta = files_ending(dir.path, ".meta").at(0);
  const fs::path lib = files_ending(dir.path, ".so").at(0);
  auto recompiles = [&]() {
    const std::uint64_t rebuilt = kernel_store_counters().rebuilt;
    KernelStore next(dir.path.string(), cxx);
    const Obtained got = next.obtain({adder(5)}, 1)[0];
    REQUIRE(got.kernel);
    CHECK(got.kernel->compiled);
    CHECK(call(got, 1.0f) == 6.0f);
    CHECK(kernel_store_counters().rebuilt == rebuilt + 1);
  };
  // Damage is done to a copy renamed over the library: this process still has the original
  // mapped, as a process that loaded it before the disk went bad would.
  const fs::path copy = dir.path / "damaged";
  fs::copy_file(lib, copy);
  SECTION("a truncated library") {
    fs::resize_file(copy, fs::file_size(copy) / 2);
    fs::rename(copy, lib);
    recompiles();
  }
  SECTION("a library with one byte changed") {
    std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    const char was = static_cast<char>(f.get());
    f.seekp(100);
    f.put(static_cast<char>(was ^ 0x5a));
    f.close();
    fs::rename(copy, lib);
    recompiles();
  }
  SECTION("a garbled meta") {
    std::ofstream(meta, std::ios::app) << "trailing junk\n";
    recompiles();
  }
  SECTION("a meta of another kernel under this one's name") {
    KernelStore other_dir("", cxx);
    REQUIRE(other_dir.obtain({adder(6)}, 1)[0].kernel);
    fs::copy_file(files_ending(other_dir.dir(), ".meta").at(0), meta, fs::copy_options::overwrite_existing);
    recompiles();
  }
}

TEST_CASE("an entry another compiler built is built again by this one", "[codegen][store]") {
  TempFolder dir;
  const fs::path wrapper = dir.path / "other-cxx";
  {
    std::ofstream w(wrapper);
    w << "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'other-cxx 9.9'; exit 0; fi\nexec "
      << find_host_compiler().describe() << " \"$@\"\n";
  }
  fs::permissions(wrapper, fs::perms::owner_all);
  const HostCompiler other = probe_host_compiler(wrapper.string());
  REQUIRE(other.identity == "other-cxx 9.9");
  const fs::path store_dir = dir.path / "kernels";
  {
    KernelStore first(store_dir.string(), other);
    REQUIRE(first.obtain({adder(30)}, 1)[0].kernel);
  }
  KernelStore second(store_dir.string(), find_host_compiler());
  const Obtained got = second.obtain({adder(30)}, 1)[0];
  REQUIRE(got.kernel);
  CHECK(got.kernel->compiled);
  const KernelFolderInfo info = inspect_kernel_folder(store_dir.string(), find_host_compiler().identity);
  REQUIRE(info.kernels.size() == 1);
  CHECK(info.kernels[0].current);
}

TEST_CASE("a compiler stopped mid-way leaves its temporary files in the job's scratch folder", "[codegen][store]") {
  TempFolder dir;
  const fs::path scratch = dir.path / "scratch";
  const fs::path process_tmp = dir.path / "process-tmp";
  fs::create_directories(scratch);
  fs::create_directories(process_tmp);
  // A compiler that writes a temporary file where TMPDIR says, then works until it is stopped.
  const fs::path slow = dir.path / "slow-cxx";
  {
    std::ofstream w(slow);
    w << "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'slow-cxx 1'; exit 0; fi\n"
         "touch \"${TMPDIR:-/tmp}/slow-cxx-temp.$$\"\nexec sleep 30\n";
  }
  fs::permissions(slow, fs::perms::owner_all);
  const HostCompiler compiler = probe_host_compiler(slow.string());
  REQUIRE(compiler.usable());
  const auto temps_in = [](const fs::path& folder) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(folder)) n += e.path().filename().string().rfind("slow-cxx-temp.", 0) == 0;
    return n;
  };
  const wpk::testing::EnvOverride tmpdir("TMPDIR", process_tmp.string());
  std::atomic<bool> cancel{false};
  std::thread stopper([&] {
    for (int i = 0; i < 500 && temps_in(scratch) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    cancel = true;
  });
  CompileStop stop;
  stop.cancel = &cancel;
  const auto outcomes = compile_shared_objects(
      compiler, {{(dir.path / "a.cpp").string(), (dir.path / "a.so").string(), {}, scratch.string()}}, 1, 60, stop);
  stopper.join();
  REQUIRE(outcomes.size() == 1);
  CHECK_FALSE(outcomes[0].ok);
  CHECK(outcomes[0].stopped);
  CHECK(outcomes[0].log == "compiling was stopped");
  CHECK(temps_in(scratch) == 1);
  CHECK(temps_in(process_tmp) == 0);
}

TEST_CASE("a batch of compiles stops at its deadline: the running compiler is killed, the rest never start",
          "[codegen][store]") {
  TempFolder dir;
  const fs::path slow = dir.path / "slow-cxx";
  std::ofstream(slow) << "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'slow-cxx 1'; exit 0; fi\nexec sleep 30\n";
  fs::permissions(slow, fs::perms::owner_all);
  const HostCompiler compiler = probe_host_compiler(slow.string());
  REQUIRE(compiler.usable());
  std::vector<CompileJob> jobs;
  for (const char* name : {"a", "b", "c"})
    jobs.push_back({(dir.path / (std::string(name) + ".cpp")).string(), (dir.path / (std::string(name) + ".so")).string(),
                    {}, ""});
  const auto start = std::chrono::steady_clock::now();
  CompileStop stop;
  stop.deadline = start + std::chrono::milliseconds(300);
  const auto outcomes = compile_shared_objects(compiler, jobs, 1, 60, stop);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  REQUIRE(outcomes.size() == 3);
  for (const CompileOutcome& o : outcomes) {
    CHECK_FALSE(o.ok);
    CHECK(o.stopped);
  }
}

TEST_CASE("a kernel that does not compile is reported, and the others of its batch still come", "[codegen][store]") {
  KernelStore store("", find_host_compiler());
  KernelSource broken = adder(7);
  broken.source = "extern \"C\" float add_7(float x) { return x + undefined_name; }\n";
  const auto got = store.obtain({adder(8), broken}, 2);
  REQUIRE(got[0].kernel);
  CHECK(call(got[0], 0.0f) == 8.0f);
  CHECK_FALSE(got[1].kernel);
  CHECK_THAT(got[1].why, Catch::Contains("did not compile") && Catch::Contains("undefined_name"));
}

TEST_CASE("an unwritable folder keeps kernels for the process only", "[codegen][store]") {
  KernelStore store("/proc/wpk-cannot-write-here", find_host_compiler());
  CHECK_FALSE(store.persistent());
  CHECK_THAT(store.why_not_persistent(), Catch::Contains("cannot write"));
  const auto got = store.obtain({adder(9)}, 1);
  REQUIRE(got[0].kernel);
  CHECK(call(got[0], 1.0f) == 10.0f);
}

TEST_CASE("two processes filling one folder at once leave it consistent", "[codegen][store]") {
  TempFolder dir;
  const HostCompiler cxx = find_host_compiler();
  std::vector<KernelSource> batch;
  for (int i = 10; i < 16; ++i) batch.push_back(adder(i));
  pid_t children[2];
  for (pid_t& child : children) {
    child = fork();
    if (child == 0) {
      KernelStore store(dir.path.string(), cxx);
      const auto got = store.obtain(batch, 2);
      bool all = true;
      for (std::size_t i = 0; i < got.size(); ++i) all = all && got[i].kernel && call(got[i], 0.0f) == 10.0f + i;
      _exit(all ? 0 : 1);
    }
  }
  for (pid_t child : children) {
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  const KernelFolderInfo info = inspect_kernel_folder(dir.path.string(), cxx.identity);
  CHECK(info.kernels.size() == batch.size());
  for (const StoredKernel& k : info.kernels) CHECK((k.intact && k.current));
  CHECK(info.leftovers.empty());
  const std::uint64_t compiled = kernel_store_counters().compiled;
  KernelStore after(dir.path.string(), cxx);
  for (const Obtained& o : after.obtain(batch, 1)) CHECK((o.kernel && !o.kernel->compiled));
  CHECK(kernel_store_counters().compiled == compiled);
}

TEST_CASE("the folder tools list, prune and clear kernels", "[codegen][store]") {
  TempFolder dir;
  const HostCompiler cxx = find_host_compiler();
  KernelStore store(dir.path.string(), cxx);
  REQUIRE(store.obtain({adder(20), adder(21)}, 1)[1].kernel);
  std::ofstream(dir.path / "stray-0123.so") << "not named by any meta";
  KernelFolderInfo info = inspect_kernel_folder(dir.path.string(), cxx.identity);
  REQUIRE(info.kernels.size() == 2);
  CHECK(info.kernels[0].name == "f32_add20__scalar");
  CHECK(info.kernels[0].bytes > 0);
  CHECK(info.orphans.size() == 1);
  // Another compiler's entries go on prune; the current ones stay.
  const auto pruned_other = prune_kernel_folder(dir.path.string(), "some other compiler 1.0");
  // Two metas, their one library (compiled together), the stray object, the recipes naming them.
  CHECK(pruned_other.size() == 6);
  REQUIRE(store.obtain({adder(22)}, 1)[0].kernel);
  CHECK(prune_kernel_folder(dir.path.string(), cxx.identity).empty());
  CHECK(clear_kernel_folder(dir.path.string()).size() == 3);  // a meta, its library, its recipe
  CHECK(inspect_kernel_folder(dir.path.string(), cxx.identity).kernels.empty());
}

}  // namespace
}  // namespace wpk::codegen
