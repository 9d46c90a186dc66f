#include "runtime/cache_folder.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "runtime/cache_key.hpp"
#include "runtime/tuning_db.hpp"
#include "wpk/error.hpp"

namespace wpk {
namespace fs = std::filesystem;

namespace {

const std::string kPrefix = "tuning-v";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// tuning-v*.tsv
bool is_tuning_file(const std::string& name) { return name.rfind(kPrefix, 0) == 0 && ends_with(name, ".tsv"); }
// tuning-v*.tsv.tmp.*
bool is_leftover(const std::string& name) {
  return name.rfind(kPrefix, 0) == 0 && name.find(".tsv.tmp.", kPrefix.size()) != std::string::npos;
}
// tuning-v*.tsv.lock: TuningFileLock's, empty; only clear touches it.
bool is_lock_file(const std::string& name) { return name.rfind(kPrefix, 0) == 0 && ends_with(name, ".tsv.lock"); }

int format_of(const std::string& name) {
  const std::string digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - 4);
  if (digits.empty() || digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoi(digits);
}

// Files and symlinks only: a folder that happens to carry one of wpk's names is not wpk's.
bool removable(const fs::directory_entry& e) {
  std::error_code ec;
  const fs::file_status st = e.symlink_status(ec);
  return !ec && (fs::is_regular_file(st) || fs::is_symlink(st));
}

// wpk's files in `dir` (sorted by name); an empty list for a missing folder.
std::vector<fs::directory_entry> wpk_files(const std::string& dir, bool& exists) {
  if (dir.empty()) throw Error(ErrorCode::InvalidArgument, "no cache folder given");
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  exists = fs::exists(st);
  if (!exists) return {};
  if (!fs::is_directory(st)) throw Error(ErrorCode::Io, "'" + dir + "' is not a folder");
  std::vector<fs::directory_entry> found;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if ((is_tuning_file(name) || is_leftover(name) || is_lock_file(name)) && removable(*it)) found.push_back(*it);
  }
  if (ec) throw Error(ErrorCode::Io, "cannot list cache folder '" + dir + "': " + ec.message());
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.path() < b.path(); });
  return found;
}

void remove_file(const fs::path& p, CacheRemoval& done) {
  std::error_code ec;
  const bool removed = fs::remove(p, ec);  // false without an error: another process was first
  if (ec) throw Error(ErrorCode::Io, "cannot remove '" + p.string() + "': " + ec.message());
  if (removed) done.files.push_back(p.string());
}

// Entries per environment, this machine's first.
std::vector<CacheEnvironmentInfo> count_environments(const TuningFile& file) {
  std::map<std::string, CacheEnvironmentInfo> by_hash;
  for (const auto& kv : file.entries) {
    CacheEnvironmentInfo& env = by_hash[kv.second.env_hash];
    env.hash = kv.second.env_hash;
    env.current = env.hash == current_env_hash();
    ++env.entries;
  }
  std::vector<CacheEnvironmentInfo> out;
  for (auto& kv : by_hash) {
    const auto known = file.environments.find(kv.first);
    if (known != file.environments.end()) kv.second.description = known->second;
    if (kv.second.current) kv.second.description = environment_key();
    out.insert(kv.second.current ? out.begin() : out.end(), kv.second);
  }
  return out;
}

}  // namespace

CacheFolderInfo inspect_cache_folder(const std::string& dir) {
  CacheFolderInfo info;
  info.dir = dir;
  for (const fs::directory_entry& e : wpk_files(dir, info.exists)) {
    const std::string name = e.path().filename().string();
    if (is_lock_file(name)) continue;
    if (is_leftover(name)) {
      info.leftovers.push_back(e.path().string());
      continue;
    }
    std::error_code ec;
    if (!e.is_regular_file(ec)) continue;  // a dangling symlink
    CacheFileInfo f;
    f.path = e.path().string();
    f.bytes = e.file_size(ec);
    if (ec) f.bytes = 0;
    f.format = format_of(name);
    f.current_format = name == tuning_file_name(kCacheFormatVersion);
    TuningFile contents;
    read_tuning_file(f.path, contents);
    f.damaged = contents.damaged;
    f.environments = count_environments(contents);
    info.files.push_back(std::move(f));
  }
  return info;
}

CacheRemoval clear_cache_folder(const std::string& dir) {
  CacheRemoval done;
  bool exists = false;
  for (const fs::directory_entry& e : wpk_files(dir, exists)) remove_file(e.path(), done);
  return done;
}

CacheRemoval prune_cache_folder(const std::string& dir) {
  CacheRemoval done;
  bool exists = false;
  const std::string current = tuning_file_name(kCacheFormatVersion);
  for (const fs::directory_entry& e : wpk_files(dir, exists)) {
    const std::string name = e.path().filename().string();
    if (is_leftover(name) || is_lock_file(name)) continue;
    if (name != current) {
      remove_file(e.path(), done);
      continue;
    }
    std::error_code ec;
    if (!e.is_regular_file(ec)) continue;
    const TuningFileLock file_lock(e.path().string());
    TuningFile contents;
    read_tuning_file(e.path().string(), contents);
    TuningFile kept;
    for (const auto& kv : contents.entries)
      if (kv.second.env_hash == current_env_hash()) kept.entries.insert(kv);
    if (kept.entries.size() == contents.entries.size() && contents.damaged == 0) continue;
    if (!write_tuning_file(e.path().string(), kept))
      throw Error(ErrorCode::Io, "cannot rewrite '" + e.path().string() + "'");
    done.rewritten = e.path().string();
    for (const CacheEnvironmentInfo& env : count_environments(contents))
      if (!env.current) done.environments.push_back(env);
    done.damaged = contents.damaged;
    done.kept = kept.entries.size();
  }
  return done;
}

}  // namespace wpk
