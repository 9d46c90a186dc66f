#pragma once
// A cache folder as a whole (`wpk cache ls|clear|prune`): which tuning files it holds, whose
// entries they are, and the two ways to shrink it. wpk's files in a folder are `tuning-v*.tsv`
// (tuning_db.hpp; the current format's and older ones) and `tuning-v*.tsv.tmp.*` (temporaries of
// writes, left over when a process died mid-write); nothing else there is ever touched.
// Only standard headers: the wpk tool includes this. Failures throw wpk::Error (wpk/error.hpp).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace wpk {

struct CacheEnvironmentInfo {
  std::string hash;         // 16 hex digits
  std::string description;  // its environment key, "model=...;flags=...;cpus=N;compiler=...;format=F";
                            // "" when the file does not say (files of older wpk versions)
  std::size_t entries = 0;
  bool current = false;     // this process's environment: this machine, compiler and format
};

struct CacheFileInfo {
  std::string path;
  std::uintmax_t bytes = 0;
  int format = -1;              // from the name, tuning-v<format>.tsv; -1 when not a number
  bool current_format = false;  // the one file this wpk reads and writes
  std::size_t damaged = 0;      // lines ignored: malformed, failed checksum, unbelievable env line
  std::vector<CacheEnvironmentInfo> environments;  // with entries; this machine's first, then by hash
};

struct CacheFolderInfo {
  std::string dir;
  bool exists = false;
  std::vector<CacheFileInfo> files;    // by name
  std::vector<std::string> leftovers;  // paths of tuning-v*.tsv.tmp.* files, by name
};

// Read-only. A missing folder is no error (exists = false); a path that is not a folder, or a
// folder that cannot be listed, is (ErrorCode::Io). "" is ErrorCode::InvalidArgument.
CacheFolderInfo inspect_cache_folder(const std::string& dir);

struct CacheRemoval {
  std::vector<std::string> files;                    // paths removed whole
  std::string rewritten;                             // the tuning file rewritten without them ("" if none)
  std::vector<CacheEnvironmentInfo> environments;    // entries removed from `rewritten`, per environment
  std::size_t damaged = 0;                           // damaged lines dropped from `rewritten`
  std::size_t kept = 0;                              // this machine's entries left in `rewritten`
  bool nothing() const { return files.empty() && rewritten.empty(); }
};

// Removes wpk's files (tuning-v*.tsv, tuning-v*.tsv.tmp.*; regular files and symlinks) and
// keeps the folder. A session running meanwhile writes its own entries back at its next store.
CacheRemoval clear_cache_folder(const std::string& dir);
// Removes other formats' tuning files whole, and from the current format's file the entries of
// other environments and damaged lines (rewritten atomically: temporary, then rename). Leftover
// temporaries stay: they may be a running process's write in progress.
CacheRemoval prune_cache_folder(const std::string& dir);

}  // namespace wpk
