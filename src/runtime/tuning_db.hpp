#pragma once
// TuningDb: which backend won each measured op signature, on disk so the next process measures
// nothing. One text file per cache folder, `tuning-v<format>.tsv`, one entry per line:
//
//   <environment hash> \t <key hash> \t <backend> \t <median us> \t <summary> \t <checksum>
//
// The key hash covers the op signature, the candidates' backend names and versions, the thread
// count and the environment (cache_key.hpp); the checksum covers the rest of the line. Lines
// that are malformed or fail their checksum are ignored and dropped at the next write; lines of
// another environment (another CPU, compiler or format sharing the folder) are kept but never
// match. After the entries, one comment line per environment that has entries says what its
// hash stands for (`wpk cache ls` shows it; readers that predate it skip it as a comment):
//
//   # env <environment hash> \t <environment key: model=...;flags=...;cpus=N;compiler=...;format=F>
//
// The key is bytes from outside: a line is believed only when the key is printable ASCII, at most
// kMaxEnvDescription bytes, and hashes to the environment hash (it is its own checksum); writers
// keep the believed lines of other environments. Writes are atomic: the whole file goes to a
// temporary in the same folder, then is renamed over the old one; each write first merges what
// other processes wrote meanwhile. Thread-safe.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace wpk {

// SessionOptions::cache_dir, else $WPK_CACHE_DIR, else $XDG_CACHE_HOME/wpk, else $HOME/.cache/wpk
// ("" when none of them is set).
std::string resolve_cache_dir(const std::string& configured);

// The file format, shared by TuningDb and the cache-folder tools (cache_folder.hpp).
constexpr std::size_t kMaxEnvDescription = 2048;

struct TuningEntry {
  std::string env_hash;
  std::string backend;
  std::string line;  // as written, checksum included
};

struct TuningFile {
  std::map<std::string, TuningEntry> entries;       // key hash -> entry
  std::map<std::string, std::string> environments;  // environment hash -> its key (believed lines only)
  std::size_t damaged = 0;                          // lines ignored while reading
};

// "tuning-v<format>.tsv".
std::string tuning_file_name(int format);
// The hash of this process's environment (cache_key.hpp's environment_key()).
const std::string& current_env_hash();
// Merges the file at `path` into `into` (a file's entry replaces one with the same key hash); a
// missing or unreadable file adds nothing. Never throws on what the file holds. Without
// `with_trial_logs`, entries whose value is a trial log (trial_log.hpp) are passed over unread
// and only counted in `skipped`.
void read_tuning_file(const std::string& path, TuningFile& into, bool with_trial_logs = true,
                      std::size_t* skipped = nullptr);
// Writes `contents` to `path` atomically (temporary `<path>.tmp.<pid>.<n>`, then rename): the
// header, the entries (over the cap of 50000, other environments' go first), then an env line
// for every environment with entries whose key is known (this process's always is). False when
// it could not; the temporary is then removed.
bool write_tuning_file(const std::string& path, const TuningFile& contents);

// Holds an exclusive advisory lock (flock) on `<path>.lock` for its lifetime, so that a read,
// merge and rewrite of a tuning file by one process cannot interleave with another's and lose
// its entries. Where the lock file cannot be opened it locks nothing (the write stays atomic).
class TuningFileLock {
 public:
  explicit TuningFileLock(const std::string& path);
  ~TuningFileLock();
  TuningFileLock(const TuningFileLock&) = delete;
  TuningFileLock& operator=(const TuningFileLock&) = delete;

 private:
  int fd_ = -1;
};

class TuningDb {
 public:
  // Never throws: a folder that cannot be created or written is reported once (warn) and the
  // database then lives in memory only, for the life of this object.
  explicit TuningDb(const std::string& dir);
  // Lookups only (a session without tuning): reads the folder's records if there are any;
  // creates, writes and warns about nothing. The records as read are shared by every such
  // database of the process while the file stays the same version (device, inode, size,
  // modification time): a session's control-flow bodies open their own, and a large file cost
  // each of them its parse.
  static std::unique_ptr<TuningDb> open_for_lookup(const std::string& dir);

  std::optional<std::string> lookup(const std::string& key) const;
  // Every stored value of this machine's environment that starts with `prefix`.
  std::vector<std::string> values_with_prefix(const std::string& prefix) const;
  void store(const std::string& key, const std::string& backend, double median_us, const std::string& summary);

  bool persistent() const;
  const std::string& path() const { return path_; }
  // The records this database shares with others of the process (open_for_lookup), or null when
  // they are its own: what is derived from them alone can be shared alike (cost_calibration.cpp).
  std::shared_ptr<const TuningFile> shared_records() const;

 private:
  TuningDb() = default;
  void disable(const std::string& why);

  std::string path_;
  bool persistent_ = false;
  mutable std::mutex mutex_;
  std::shared_ptr<TuningFile> contents_ = std::make_shared<TuningFile>();  // this and other environments
  bool shared_ = false;  // contents_ is the process's snapshot of the file: copied before a change
};

}  // namespace wpk
