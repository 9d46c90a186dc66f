#include "runtime/tuning_db.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "codegen/jit/file_version.hpp"
#include "runtime/cache_key.hpp"
#include "runtime/logging.hpp"
#include "runtime/trial_log.hpp"

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

bool is_hex16(const std::string& s) {
  if (s.size() != 16) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// Whether `key` may be shown and written as the description of environment `hash`.
bool believable(const std::string& hash, const std::string& key) {
  if (key.empty() || key.size() > kMaxEnvDescription) return false;
  for (unsigned char c : key)
    if (c < 0x20 || c > 0x7e) return false;
  return hex64(fnv1a64(key)) == hash;
}

const char kEnvPrefix[] = "# env ";
constexpr std::size_t kEnvPrefixSize = sizeof kEnvPrefix - 1;

// The records of the file at `path` as this process last read that version of it; read again
// when the file changed (a write renames a new file into place: another inode).
std::shared_ptr<TuningFile> records_of(const std::string& path) {
  const std::string version = codegen::file_version(path);
  if (version.empty()) return std::make_shared<TuningFile>();
  static std::mutex mutex;
  static std::map<std::string, std::pair<std::string, std::shared_ptr<TuningFile>>> read;  // path -> (version, records)
  std::lock_guard<std::mutex> lock(mutex);
  auto& [known_version, records] = read[path];
  if (!records || known_version != version) {
    // Trial logs (most of a tuned folder's bytes) only calibrate the cost model, and the
    // calibration has its own record: read them only for a file written before it existed.
    records = std::make_shared<TuningFile>();
    std::size_t trial_logs = 0;
    read_tuning_file(path, *records, false, &trial_logs);
    if (trial_logs > 0 && !records->entries.count(hex64(fnv1a64(calibration_record_key())))) {
      records = std::make_shared<TuningFile>();
      read_tuning_file(path, *records);
    }
    known_version = version;
  }
  return records;
}

}  // namespace

std::string tuning_file_name(int format) { return "tuning-v" + std::to_string(format) + ".tsv"; }

const std::string& current_env_hash() {
  static const std::string hash = hex64(fnv1a64(environment_key()));
  return hash;
}

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
  path_ = (fs::path(dir) / tuning_file_name(kCacheFormatVersion)).string();
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
  read_tuning_file(path_, *contents_);
}

std::unique_ptr<TuningDb> TuningDb::open_for_lookup(const std::string& dir) {
  std::unique_ptr<TuningDb> db(new TuningDb());
  if (dir.empty()) return db;
  db->path_ = (fs::path(dir) / tuning_file_name(kCacheFormatVersion)).string();
  db->contents_ = records_of(db->path_);  // a missing or unreadable file is no records
  db->shared_ = true;
  return db;
}

std::shared_ptr<const TuningFile> TuningDb::shared_records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return shared_ ? contents_ : nullptr;
}

void TuningDb::disable(const std::string& why) {
  persistent_ = false;
  logger().warn("tuning results will not be saved: {}", why);
}

bool TuningDb::persistent() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return persistent_;
}

void read_tuning_file(const std::string& path, TuningFile& into, bool with_trial_logs, std::size_t* skipped) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  std::size_t bad = 0;
  // "<env hash>\t<key hash>\t" precede the value.
  constexpr std::size_t kValueAt = 16 + 1 + 16 + 1;
  const std::size_t trial_prefix = std::strlen(kTrialLogPrefix);
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (!with_trial_logs && line.size() > kValueAt + trial_prefix && line.compare(kValueAt, trial_prefix, kTrialLogPrefix) == 0) {
      if (skipped) ++*skipped;
      continue;
    }
    if (line[0] == '#') {
      if (line.compare(0, kEnvPrefixSize, kEnvPrefix) != 0) continue;  // the header, or a comment
      // "# env <hash>\t<key>" (a space after the hash is read as well).
      const std::string hash = line.substr(kEnvPrefixSize, 16);
      const std::size_t key_at = kEnvPrefixSize + 17;
      if (line.size() > key_at && is_hex16(hash) && (line[key_at - 1] == ' ' || line[key_at - 1] == '\t') &&
          believable(hash, line.substr(key_at)))
        into.environments[hash] = line.substr(key_at);
      else
        ++bad;
      continue;
    }
    const auto fields = split_tabs(line);
    const std::size_t last_tab = line.rfind('\t');
    // Six fields, and the checksum of everything before the last tab must match the last field.
    if (fields.size() != 6 || fields[0].size() != 16 || fields[1].size() != 16 || fields[2].empty() ||
        hex64(fnv1a64(line.substr(0, last_tab))) != fields[5]) {
      ++bad;
      continue;
    }
    into.entries[fields[1]] = TuningEntry{fields[0], fields[2], line};
  }
  // Descriptions of environments without entries go: a file of nothing but env lines stays small.
  std::set<std::string> used;
  for (const auto& kv : into.entries) used.insert(kv.second.env_hash);
  for (auto it = into.environments.begin(); it != into.environments.end();)
    it = used.count(it->first) ? std::next(it) : into.environments.erase(it);
  into.damaged += bad;
  if (bad) logger().debug("tuning database {}: ignored {} damaged lines", path, bad);
}

std::optional<std::string> TuningDb::lookup(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = contents_->entries.find(hex64(fnv1a64(key)));
  if (it == contents_->entries.end() || it->second.env_hash != current_env_hash()) return std::nullopt;
  return it->second.backend;
}

std::vector<std::string> TuningDb::values_with_prefix(const std::string& prefix) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const auto& kv : contents_->entries)
    if (kv.second.env_hash == current_env_hash() && kv.second.backend.rfind(prefix, 0) == 0) out.push_back(kv.second.backend);
  return out;
}

TuningFileLock::TuningFileLock(const std::string& path) {
  fd_ = ::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ >= 0) {
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
}

TuningFileLock::~TuningFileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

void TuningDb::store(const std::string& key, const std::string& backend, double median_us, const std::string& summary) {
  const std::string key_hash = hex64(fnv1a64(key));
  char us[32];
  std::snprintf(us, sizeof us, "%.3f", median_us);
  std::string line = current_env_hash() + "\t" + key_hash + "\t" + backend + "\t" + us + "\t" + summary;
  line += "\t" + hex64(fnv1a64(line));

  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<TuningFileLock> file_lock;
  if (persistent_) file_lock.emplace(path_);
  if (shared_) {  // the process's snapshot of the file stays as read
    contents_ = std::make_shared<TuningFile>(*contents_);
    shared_ = false;
  }
  if (persistent_) read_tuning_file(path_, *contents_);  // merge what other processes stored since we read
  contents_->entries[key_hash] = TuningEntry{current_env_hash(), backend, line};
  if (persistent_ && !write_tuning_file(path_, *contents_)) disable("cannot write '" + path_ + "'");
}

bool write_tuning_file(const std::string& path, const TuningFile& contents) {
  static std::atomic<unsigned> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out << "# wpk tuning database, format " << kCacheFormatVersion << ": env\tkey\tbackend\tmedian_us\top\tchecksum\n";
    const auto& entries = contents.entries;
    std::size_t skip = entries.size() > kMaxEntries ? entries.size() - kMaxEntries : 0;
    std::set<std::string> written_envs;
    for (const auto& kv : entries) {
      // Over the cap, entries of other environments go first.
      if (skip && kv.second.env_hash != current_env_hash()) {
        --skip;
        continue;
      }
      out << kv.second.line << '\n';
      written_envs.insert(kv.second.env_hash);
    }
    for (const std::string& hash : written_envs) {
      const auto known = contents.environments.find(hash);
      const std::string& key = hash == current_env_hash() ? environment_key()
                               : known != contents.environments.end() ? known->second : std::string();
      if (believable(hash, key)) out << kEnvPrefix << hash << '\t' << key << '\n';
    }
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);  // atomic on POSIX: readers see the old file or the new, never half
  if (ec) std::remove(tmp.c_str());
  return !ec;
}

}  // namespace wpk
