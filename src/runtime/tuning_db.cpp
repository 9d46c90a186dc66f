#include "runtime/tuning_db.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "runtime/cache_key.hpp"
#include "runtime/logging.hpp"

namespace wpk {
namespace fs = std::filesystem;

namespace {

// More lines than this and the oldest are dropped: a folder shared by many machines must not
// grow without bound.
constexpr std::size_t kMaxEntries = 50000;

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t tab = line.find('\t', pos);
    fields.push_back(line.substr(pos, tab == std::string::npos ? std::string::npos : tab - pos));
    if (tab == std::string::npos) return fields;
    pos = tab + 1;
  }
}

std::string env_hash() { return hex64(fnv1a64(environment_key())); }

}  // namespace

std::string resolve_cache_dir(const std::string& configured) {
  if (!configured.empty()) return configured;
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? std::string(v) : std::string();
  };
  if (auto d = env("WPK_CACHE_DIR"); !d.empty()) return d;
  if (auto d = env("XDG_CACHE_HOME"); !d.empty()) return (fs::path(d) / "wpk").string();
  if (auto d = env("HOME"); !d.empty()) return (fs::path(d) / ".cache" / "wpk").string();
  return "";
}

TuningDb::TuningDb(const std::string& dir) {
  if (dir.empty()) {
    disable("no cache folder (set SessionOptions::cache_dir, WPK_CACHE_DIR or HOME)");
    return;
  }
  path_ = (fs::path(dir) / ("tuning-v" + std::to_string(kCacheFormatVersion) + ".tsv")).string();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) {
    disable("cannot create cache folder '" + dir + "'" + (ec ? ": " + ec.message() : ""));
    return;
  }
  if (access(dir.c_str(), W_OK) != 0) {
    disable("cache folder '" + dir + "' is not writable");
    return;
  }
  persistent_ = true;
  read_file(entries_);
}

void TuningDb::disable(const std::string& why) {
  persistent_ = false;
  logger().warn("tuning results will not be saved: {}", why);
}

bool TuningDb::persistent() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return persistent_;
}

void TuningDb::read_file(std::map<std::string, Entry>& into) const {
  std::ifstream in(path_, std::ios::binary);
  std::string line;
  std::size_t bad = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto fields = split_tabs(line);
    const std::size_t last_tab = line.rfind('\t');
    // Six fields, and the checksum of everything before the last tab must match the last field.
    if (fields.size() != 6 || fields[0].size() != 16 || fields[1].size() != 16 || fields[2].empty() ||
        hex64(fnv1a64(line.substr(0, last_tab))) != fields[5]) {
      ++bad;
      continue;
    }
    into[fields[1]] = Entry{fields[0], fields[2], line};
  }
  if (bad) logger().debug("tuning database {}: ignored {} damaged entries", path_, bad);
}

std::optional<std::string> TuningDb::lookup(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(hex64(fnv1a64(key)));
  if (it == entries_.end() || it->second.env_hash != env_hash()) return std::nullopt;
  return it->second.backend;
}

void TuningDb::store(const std::string& key, const std::string& backend, double median_us, const std::string& summary) {
  const std::string key_hash = hex64(fnv1a64(key));
  char us[32];
  std::snprintf(us, sizeof us, "%.3f", median_us);
  std::string line = env_hash() + "\t" + key_hash + "\t" + backend + "\t" + us + "\t" + summary;
  line += "\t" + hex64(fnv1a64(line));

  std::lock_guard<std::mutex> lock(mutex_);
  if (persistent_) read_file(entries_);  // merge what other processes stored since we read
  entries_[key_hash] = Entry{env_hash(), backend, line};
  if (persistent_ && !write_file(entries_)) disable("cannot write '" + path_ + "'");
}

bool TuningDb::write_file(const std::map<std::string, Entry>& entries) const {
  static std::atomic<unsigned> counter{0};
  const std::string tmp = path_ + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out << "# wpk tuning database, format " << kCacheFormatVersion << ": env\tkey\tbackend\tmedian_us\top\tchecksum\n";
    std::size_t skip = entries.size() > kMaxEntries ? entries.size() - kMaxEntries : 0;
    for (const auto& kv : entries) {
      // Over the cap, entries of other environments go first.
      if (skip && kv.second.env_hash != env_hash()) {
        --skip;
        continue;
      }
      out << kv.second.line << '\n';
    }
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path_, ec);  // atomic on POSIX: readers see the old file or the new, never half
  if (ec) std::remove(tmp.c_str());
  return !ec;
}

}  // namespace wpk
