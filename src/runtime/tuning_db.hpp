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
// match. Writes are atomic: the whole file goes to a temporary in the same folder, then is
// renamed over the old one; each write first merges what other processes wrote meanwhile.
// Thread-safe.
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace wpk {

// SessionOptions::cache_dir, else $WPK_CACHE_DIR, else $XDG_CACHE_HOME/wpk, else $HOME/.cache/wpk
// ("" when none of them is set).
std::string resolve_cache_dir(const std::string& configured);

class TuningDb {
 public:
  // Never throws: a folder that cannot be created or written is reported once (warn) and the
  // database then lives in memory only, for the life of this object.
  explicit TuningDb(const std::string& dir);

  std::optional<std::string> lookup(const std::string& key) const;
  void store(const std::string& key, const std::string& backend, double median_us, const std::string& summary);

  bool persistent() const;
  const std::string& path() const { return path_; }

 private:
  struct Entry {
    std::string env_hash;
    std::string backend;
    std::string line;  // as written, checksum included
  };
  // Parses the file into `into` (key hash -> entry); bad lines are skipped.
  void read_file(std::map<std::string, Entry>& into) const;
  bool write_file(const std::map<std::string, Entry>& entries) const;
  void disable(const std::string& why);

  std::string path_;
  bool persistent_ = false;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;  // key hash -> entry (this and other environments)
};

}  // namespace wpk
