#include "codegen/jit/cubin_store.hpp"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "codegen/jit/sha256.hpp"

namespace wpk::codegen {
namespace {

constexpr const char* kFormat = "wpk-cubin-1";
constexpr const char* kSuffix = ".cubin";

std::atomic<std::uint64_t> compiled_count{0}, loaded_count{0}, rebuilt_count{0};

// The payload of a verified entry; "" when the file is absent, short, damaged or foreign.
std::string read_entry(const std::filesystem::path& path, bool* damaged) {
  *damaged = false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string header;
  std::getline(in, header);
  std::istringstream fields(header);
  std::string format, checksum;
  std::size_t size = 0;
  fields >> format >> size >> checksum;
  std::string payload((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (format != kFormat || payload.size() != size || size == 0 || sha256_hex(payload) != checksum) {
    *damaged = true;
    return "";
  }
  return payload;
}

void write_entry(const std::filesystem::path& path, const std::string& payload) {
  std::random_device rd;
  const std::filesystem::path tmp =
      path.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return;  // a folder that cannot be written: the kernel lasts for this process
    out << kFormat << ' ' << payload.size() << ' ' << sha256_hex(payload) << '\n';
    out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    if (!out.flush()) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

// A small text file written whole (temporary, then rename), so a concurrent reader never sees
// it half written.
void write_entry_text(const std::filesystem::path& path, const std::string& text) {
  std::random_device rd;
  const std::filesystem::path tmp = path.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!(out << text)) return;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace

CubinStore::CubinStore(std::string dir) : dir_(std::move(dir)) {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) dir_.clear();
}

std::string CubinStore::key_of(const std::string& source, int sm, const std::string& nvrtc_version,
                               const std::string& device) const {
  return sha256_hex(std::string(kFormat) + '\n' + std::to_string(sm) + '\n' + nvrtc_version + '\n' + device + '\n' + source);
}

std::string CubinStore::obtain(const Nvrtc* nvrtc, const std::string& source, const std::string& symbol, int sm,
                               const std::string& device) {
  // Without NVRTC the version is unknown: entries are looked up under the NVRTC that made them,
  // named in a small index beside them.
  const std::string version = nvrtc ? nvrtc->version() : "";
  std::filesystem::path path;
  if (!dir_.empty()) {
    const std::filesystem::path index = std::filesystem::path(dir_) / ("nvrtc-" + std::to_string(sm) + ".version");
    std::string known = version;
    if (known.empty()) {
      std::ifstream in(index);
      std::getline(in, known);
    } else {
      std::ifstream in(index);
      std::string stored;
      std::getline(in, stored);
      if (stored != version) write_entry_text(index, version + "\n");
    }
    path = std::filesystem::path(dir_) / (key_of(source, sm, known, device) + kSuffix);
    bool damaged = false;
    std::string cubin = read_entry(path, &damaged);
    if (!cubin.empty()) {
      ++loaded_count;
      return cubin;
    }
    if (damaged) ++rebuilt_count;
  }
  if (!nvrtc)
    throw std::runtime_error(symbol + " is not in the kernel cache and this machine has no NVRTC to compile it");
  std::string cubin = nvrtc->compile(source, symbol, sm).cubin;
  ++compiled_count;
  if (!path.empty()) write_entry(path, cubin);
  return cubin;
}

CubinCounters cubin_counters() { return {compiled_count.load(), loaded_count.load(), rebuilt_count.load()}; }

CubinFolderInfo inspect_cubin_folder(const std::string& dir) {
  CubinFolderInfo info;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() != kSuffix) continue;
    bool damaged = false;
    const std::string payload = read_entry(e.path(), &damaged);
    if (payload.empty()) {
      ++info.damaged;
      continue;
    }
    ++info.entries;
    info.bytes += e.file_size(ec);
  }
  return info;
}

std::vector<std::string> clear_cubin_folder(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool ours = e.path().extension() == kSuffix || e.path().extension() == ".version" ||
                      name.find(".tmp.") != std::string::npos;
    if (ours && std::filesystem::remove(e.path(), ec)) removed.push_back(e.path().string());
  }
  return removed;
}

std::vector<std::string> prune_cubin_folder(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() != kSuffix) continue;
    bool damaged = false;
    if (read_entry(e.path(), &damaged).empty() && std::filesystem::remove(e.path(), ec)) removed.push_back(e.path().string());
  }
  return removed;
}

}  // namespace wpk::codegen
