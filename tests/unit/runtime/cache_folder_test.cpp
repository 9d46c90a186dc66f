// A cache folder shared by machines: the tuning file says which environment each hash stands
// for (`# env` lines), ls reports every file and environment, prune keeps only this machine's
// entries of the current format, clear removes wpk's files and nothing else.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/cache_folder.hpp"
#include "runtime/cache_key.hpp"
#include "runtime/tuning_db.hpp"
#include "support/onnx_model_builder.hpp"
#include "wpk/error.hpp"

using namespace wpk;
namespace fs = std::filesystem;

namespace {

const std::string kForeignKey = "model=Foreign CPU 9000;flags=sse2,avx;cpus=4;compiler=11.4.0;format=1";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One entry line of environment `env` for op key `key`, its checksum right.
std::string entry_line(const std::string& env, const std::string& key, const std::string& backend) {
  std::string line = env + "\t" + hex64(fnv1a64(key)) + "\t" + backend + "\t1.000\tRelu f32[1,8]";
  return line + "\t" + hex64(fnv1a64(line)) + "\n";
}

const CacheEnvironmentInfo* find_env(const CacheFileInfo& f, const std::string& hash) {
  for (const auto& e : f.environments)
    if (e.hash == hash) return &e;
  return nullptr;
}

struct Folder {
  std::string dir = wpk::testing::temp_dir("cache_folder");
  fs::path v1 = fs::path(dir) / tuning_file_name(kCacheFormatVersion);
  std::string foreign = hex64(fnv1a64(kForeignKey));
  std::string undescribed = "0123456789abcdef";
  std::string too_long_key = "model=" + std::string(kMaxEnvDescription, 'x');
  std::string too_long = hex64(fnv1a64(too_long_key));
  std::string escape_key = "model=\x1b[2Jevil";
  std::string escape = hex64(fnv1a64(escape_key));

  Folder() {
    {
      TuningDb db(dir);  // this machine: two entries
      REQUIRE(db.persistent());
      db.store("op=A", "onednn", 1.0, "A");
      db.store("op=B", "cpu", 2.0, "B");
    }
    std::ofstream out(v1, std::ios::app | std::ios::binary);
    for (const char* k : {"op=F1", "op=F2", "op=F3"}) out << entry_line(foreign, k, "onednn");
    out << "# env " << foreign << "\t" << kForeignKey << "\n";
    out << entry_line(undescribed, "op=U", "cpu");
    out << entry_line(too_long, "op=L", "cpu") << "# env " << too_long << "\t" << too_long_key << "\n";
    out << entry_line(escape, "op=E", "cpu") << "# env " << escape << "\t" << escape_key << "\n";
    // Garbled: a lie about an environment, a torn entry, one with a wrong checksum, junk.
    std::string bad = entry_line(foreign, "op=F4", "onednn");
    bad[bad.find("onednn")] = 'O';
    out << "# env " << undescribed << "\tmodel=Lies;flags=;cpus=1;compiler=x;format=1\n"
        << entry_line(foreign, "op=F5", "cpu").substr(0, 30) << "\n"
        << bad << "\x01\x02garbage\tline\n\t\t\t\t\t\n# env \n";
    out.close();
    std::ofstream(fs::path(dir) / "tuning-v0.tsv") << entry_line(undescribed, "op=Old", "cpu");
    std::ofstream(fs::path(dir) / "tuning-v1.tsv.tmp.999.0") << "half a write";
    std::ofstream(fs::path(dir) / "notes.txt") << "not wpk's";
    fs::create_directories(fs::path(dir) / "tuning-v7.tsv");  // a folder with wpk's name: not wpk's
  }
};

}  // namespace

TEST_CASE("the tuning file describes its environments and writers keep the others'", "[cache]") {
  Folder f;
  TuningDb(f.dir).store("op=C", "cpu", 3.0, "C");  // a rewrite: merges, keeps, describes
  const std::string text = slurp(f.v1);
  CHECK(text.find("# env " + current_env_hash() + "\t" + environment_key() + "\n") != std::string::npos);
  CHECK(text.find("# env " + f.foreign + "\t" + kForeignKey + "\n") != std::string::npos);
  CHECK(text.find("Lies") == std::string::npos);   // its hash does not match: not believed, not kept
  CHECK(text.find("xxxx") == std::string::npos);   // over the length cap
  CHECK(text.find("evil") == std::string::npos);   // control characters
  CHECK(text.find("garbage") == std::string::npos);
  CHECK(text.find(entry_line(f.undescribed, "op=U", "cpu")) != std::string::npos);  // entries survive
  // Env lines come after every entry (readers that predate them see comments only).
  const std::size_t first_env = text.find("\n# env ");
  REQUIRE(first_env != std::string::npos);
  for (std::size_t at = first_env; at + 1 < text.size(); at = text.find('\n', at + 1)) CHECK(text.compare(at, 7, "\n# env ") == 0);
  TuningDb db(f.dir);
  CHECK(db.lookup("op=A") == std::optional<std::string>("onednn"));
  CHECK(db.lookup("op=C") == std::optional<std::string>("cpu"));
  CHECK(db.lookup("op=F1") == std::nullopt);  // another machine's
}

TEST_CASE("inspect_cache_folder reports every tuning file and environment", "[cache]") {
  Folder f;
  const CacheFolderInfo info = inspect_cache_folder(f.dir);
  CHECK(info.exists);
  REQUIRE(info.files.size() == 2);  // not notes.txt, not the folder tuning-v7.tsv
  CHECK(fs::path(info.files[0].path).filename() == "tuning-v0.tsv");
  CHECK(info.files[0].format == 0);
  CHECK_FALSE(info.files[0].current_format);
  REQUIRE(info.files[0].environments.size() == 1);
  CHECK(info.files[0].environments[0].hash == f.undescribed);
  CHECK_FALSE(info.files[0].environments[0].current);

  const CacheFileInfo& v1 = info.files[1];
  CHECK(v1.path == f.v1.string());
  CHECK(v1.format == kCacheFormatVersion);
  CHECK(v1.current_format);
  CHECK(v1.bytes == fs::file_size(f.v1));
  CHECK(v1.damaged == 8);  // the lie, too long, escape, torn, bad checksum, junk, tabs, "# env "
  REQUIRE(v1.environments.size() == 5);
  CHECK(v1.environments[0].current);  // this machine's first
  CHECK(v1.environments[0].hash == current_env_hash());
  CHECK(v1.environments[0].entries == 2);
  CHECK(v1.environments[0].description == environment_key());
  const CacheEnvironmentInfo* foreign = find_env(v1, f.foreign);
  REQUIRE(foreign);
  CHECK_FALSE(foreign->current);
  CHECK(foreign->entries == 3);
  CHECK(foreign->description == kForeignKey);
  for (const std::string& hash : {f.undescribed, f.too_long, f.escape}) {
    const CacheEnvironmentInfo* e = find_env(v1, hash);
    REQUIRE(e);
    CHECK(e->entries == 1);
    CHECK(e->description.empty());
    CHECK_FALSE(e->current);
  }
  REQUIRE(info.leftovers.size() == 1);
  CHECK(fs::path(info.leftovers[0]).filename() == "tuning-v1.tsv.tmp.999.0");

  const std::string missing = f.dir + "/missing";
  CHECK_FALSE(inspect_cache_folder(missing).exists);
  CHECK(inspect_cache_folder(missing).files.empty());
  CHECK_FALSE(fs::exists(missing));  // read-only: nothing created
  CHECK_THROWS_AS(inspect_cache_folder(f.dir + "/notes.txt"), wpk::Error);
  CHECK_THROWS_AS(inspect_cache_folder(""), wpk::Error);
}

TEST_CASE("prune keeps this machine's entries and nothing else of wpk's", "[cache]") {
  Folder f;
  const CacheRemoval done = prune_cache_folder(f.dir);
  REQUIRE(done.files.size() == 1);
  CHECK(fs::path(done.files[0]).filename() == "tuning-v0.tsv");
  CHECK(done.rewritten == f.v1.string());
  CHECK(done.environments.size() == 4);
  for (const auto& e : done.environments) CHECK_FALSE(e.current);
  CHECK(done.damaged == 8);
  CHECK(done.kept == 2);

  CHECK(fs::exists(fs::path(f.dir) / "notes.txt"));
  CHECK(fs::exists(fs::path(f.dir) / "tuning-v1.tsv.tmp.999.0"));  // may be a write in progress
  CHECK(fs::is_directory(fs::path(f.dir) / "tuning-v7.tsv"));
  CHECK_FALSE(fs::exists(fs::path(f.dir) / "tuning-v0.tsv"));
  const std::string text = slurp(f.v1);
  CHECK(text.find(f.foreign) == std::string::npos);
  CHECK(text.find(f.undescribed) == std::string::npos);
  CHECK(text.find("# env " + current_env_hash() + "\t") != std::string::npos);

  const CacheFolderInfo info = inspect_cache_folder(f.dir);
  REQUIRE(info.files.size() == 1);
  CHECK(info.files[0].damaged == 0);
  REQUIRE(info.files[0].environments.size() == 1);
  CHECK(info.files[0].environments[0].current);
  CHECK(info.files[0].environments[0].entries == 2);

  TuningDb db(f.dir);  // what a session finds afterwards
  CHECK(db.lookup("op=A") == std::optional<std::string>("onednn"));
  CHECK(db.lookup("op=B") == std::optional<std::string>("cpu"));

  CHECK(prune_cache_folder(f.dir).nothing());  // nothing left to prune
  CHECK(prune_cache_folder(f.dir + "/missing").nothing());
}

TEST_CASE("clear removes wpk's files and only those", "[cache]") {
  Folder f;
  const CacheRemoval done = clear_cache_folder(f.dir);
  CHECK(done.files.size() == 4);  // tuning-v0.tsv, tuning-v1.tsv, its lock file, the leftover temporary
  CHECK_FALSE(fs::exists(fs::path(f.dir) / "tuning-v1.tsv.lock"));
  CHECK(done.rewritten.empty());
  CHECK_FALSE(fs::exists(f.v1));
  CHECK_FALSE(fs::exists(fs::path(f.dir) / "tuning-v0.tsv"));
  CHECK_FALSE(fs::exists(fs::path(f.dir) / "tuning-v1.tsv.tmp.999.0"));
  CHECK(slurp(fs::path(f.dir) / "notes.txt") == "not wpk's");
  CHECK(fs::is_directory(fs::path(f.dir) / "tuning-v7.tsv"));
  const CacheFolderInfo info = inspect_cache_folder(f.dir);
  CHECK(info.files.empty());
  CHECK(info.leftovers.empty());
  CHECK(clear_cache_folder(f.dir).nothing());
  CHECK(TuningDb(f.dir).lookup("op=A") == std::nullopt);

  // An emptied folder stays, so a session started meanwhile can still write into it.
  fs::remove(fs::path(f.dir) / "notes.txt");
  fs::remove(fs::path(f.dir) / "tuning-v7.tsv");
  TuningDb(f.dir).store("op=A", "cpu", 1.0, "A");
  CHECK(clear_cache_folder(f.dir).files.size() == 2);  // the file and its lock file
  CHECK(fs::is_directory(f.dir));
}

TEST_CASE("env lines with a space after the hash are read too", "[cache]") {
  const std::string dir = wpk::testing::temp_dir("cache_tab");
  const std::string foreign = hex64(fnv1a64(kForeignKey));
  std::ofstream(fs::path(dir) / tuning_file_name(kCacheFormatVersion))
      << entry_line(foreign, "op=F1", "cpu") << "# env " << foreign << " " << kForeignKey << "\n";
  const CacheFolderInfo info = inspect_cache_folder(dir);
  REQUIRE(info.files.size() == 1);
  REQUIRE(info.files[0].environments.size() == 1);
  CHECK(info.files[0].environments[0].description == kForeignKey);
  CHECK(info.files[0].damaged == 0);
}
