#include "codegen/jit/nvrtc_compiler.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <regex>
#include <stdexcept>

namespace wpk::codegen {

// The few NVRTC entry points wpk calls, declared here (their C signatures are stable across
// releases) so that building needs no CUDA header.
using nvrtcResult = int;
using nvrtcProgram = void*;
struct Nvrtc::Api {
  void* library = nullptr;
  const char* (*GetErrorString)(nvrtcResult) = nullptr;
  nvrtcResult (*Version)(int*, int*) = nullptr;
  nvrtcResult (*GetNumSupportedArchs)(int*) = nullptr;
  nvrtcResult (*GetSupportedArchs)(int*) = nullptr;
  nvrtcResult (*CreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  nvrtcResult (*DestroyProgram)(nvrtcProgram*) = nullptr;
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, std::size_t*) = nullptr;
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*GetCUBINSize)(nvrtcProgram, std::size_t*) = nullptr;
  nvrtcResult (*GetCUBIN)(nvrtcProgram, char*) = nullptr;
};

namespace {

void* open_library(std::string& why) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("WPK_NVRTC"); env && *env) candidates.push_back(env);
  candidates.insert(candidates.end(), {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13",
                                       "/usr/local/cuda/lib64/libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so"});
  for (const auto& c : candidates)
    if (void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  const char* err = dlerror();
  why = std::string("NVRTC not found (libnvrtc.so.13 on the library path, in /usr/local/cuda/lib64 or $WPK_NVRTC): ") +
        (err ? err : "");
  return nullptr;
}

template <typename F>
bool bind(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

const Nvrtc::Api* load(std::string& why) {
  void* lib = open_library(why);
  if (!lib) return nullptr;
  auto* api = new Nvrtc::Api;  // lives as long as the process, like the library
  api->library = lib;
  const bool ok = bind(lib, "nvrtcGetErrorString", api->GetErrorString) && bind(lib, "nvrtcVersion", api->Version) &&
                  bind(lib, "nvrtcGetNumSupportedArchs", api->GetNumSupportedArchs) &&
                  bind(lib, "nvrtcGetSupportedArchs", api->GetSupportedArchs) &&
                  bind(lib, "nvrtcCreateProgram", api->CreateProgram) && bind(lib, "nvrtcDestroyProgram", api->DestroyProgram) &&
                  bind(lib, "nvrtcCompileProgram", api->CompileProgram) &&
                  bind(lib, "nvrtcGetProgramLogSize", api->GetProgramLogSize) &&
                  bind(lib, "nvrtcGetProgramLog", api->GetProgramLog) && bind(lib, "nvrtcGetCUBINSize", api->GetCUBINSize) &&
                  bind(lib, "nvrtcGetCUBIN", api->GetCUBIN);
  if (!ok) {
    why = "the NVRTC library found lacks an entry point wpk calls (it is older than CUDA 11.2)";
    delete api;
    return nullptr;
  }
  return api;
}

}  // namespace

const Nvrtc* Nvrtc::get(std::string* why) {
  static std::string reason;
  static const Nvrtc* instance = [] {
    const Api* api = load(reason);
    return api ? new Nvrtc(api) : nullptr;
  }();
  if (!instance && why) *why = reason;
  return instance;
}

std::string Nvrtc::version() const {
  int major = 0, minor = 0;
  api_->Version(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<int> Nvrtc::architectures() const {
  int n = 0;
  if (api_->GetNumSupportedArchs(&n) != 0 || n <= 0) return {};
  std::vector<int> archs(static_cast<std::size_t>(n));
  if (api_->GetSupportedArchs(archs.data()) != 0) return {};
  return archs;
}

CompiledCubin Nvrtc::compile(const std::string& source, const std::string& name, int sm) const {
  nvrtcProgram prog = nullptr;
  if (nvrtcResult r = api_->CreateProgram(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr); r != 0)
    throw std::runtime_error(name + ": NVRTC could not take the source: " + api_->GetErrorString(r));
  struct Destroy {
    const Api* api;
    nvrtcProgram* p;
    ~Destroy() { api->DestroyProgram(p); }
  } destroy{api_, &prog};
  const std::string arch = "--gpu-architecture=sm_" + std::to_string(sm);
  const char* options[] = {arch.c_str(), "--std=c++17", "--ptxas-options=-v", "-default-device"};
  const nvrtcResult r = api_->CompileProgram(prog, 4, options);
  std::size_t log_size = 0;
  api_->GetProgramLogSize(prog, &log_size);
  CompiledCubin out;
  out.log.assign(log_size, '\0');
  if (log_size) api_->GetProgramLog(prog, out.log.data());
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  if (r != 0)
    throw std::runtime_error(name + ": NVRTC failed for sm_" + std::to_string(sm) + " (" + api_->GetErrorString(r) + "): " +
                             out.log.substr(0, 4096));
  std::size_t size = 0;
  if (api_->GetCUBINSize(prog, &size) != 0 || size == 0)
    throw std::runtime_error(name + ": NVRTC produced no cubin for sm_" + std::to_string(sm));
  out.cubin.resize(size);
  api_->GetCUBIN(prog, out.cubin.data());
  out.resources = parse_ptxas_resources(out.log);
  if (out.resources.registers < 0) out.resources.registers = cubin_register_count(out.cubin);
  if (out.resources.shared_bytes < 0) out.resources.shared_bytes = cubin_shared_bytes(out.cubin);
  return out;
}

CubinResources parse_ptxas_resources(const std::string& log) {
  CubinResources r;
  std::smatch m;
  if (std::regex_search(log, m, std::regex(R"(Used (\d+) registers)"))) r.registers = std::stoi(m[1]);
  if (std::regex_search(log, m, std::regex(R"((\d+) bytes smem)"))) r.shared_bytes = std::stoll(m[1]);
  if (std::regex_search(log, m, std::regex(R"((\d+) bytes spill stores)"))) r.spill_bytes = std::stoll(m[1]);
  if (std::regex_search(log, m, std::regex(R"((\d+) bytes stack frame)"))) r.stack_bytes = std::stoll(m[1]);
  return r;
}

namespace {

template <typename T>
bool read_at(const std::string& bytes, std::size_t at, T* out) {
  if (at > bytes.size() || bytes.size() - at < sizeof(T)) return false;
  std::memcpy(out, bytes.data() + at, sizeof(T));
  return true;
}

}  // namespace

namespace {

// Calls f(name, offset, size) for each section of an ELF64 little-endian image whose bytes lie
// inside it; false when the image is not one.
template <typename F>
bool for_each_section(const std::string& elf, const F& f) {
  if (elf.size() < 64 || elf.compare(0, 4, "\x7f" "ELF") != 0 || elf[4] != 2) return false;
  std::uint64_t shoff = 0;
  std::uint16_t shentsize = 0, shnum = 0, shstrndx = 0;
  if (!read_at(elf, 0x28, &shoff) || !read_at(elf, 0x3a, &shentsize) || !read_at(elf, 0x3c, &shnum) ||
      !read_at(elf, 0x3e, &shstrndx) || shentsize < 64 || shstrndx >= shnum)
    return false;
  auto section = [&](std::uint16_t i, std::uint32_t* name, std::uint32_t* type, std::uint64_t* offset, std::uint64_t* size) {
    const std::size_t at = static_cast<std::size_t>(shoff + std::uint64_t(i) * shentsize);
    return read_at(elf, at, name) && read_at(elf, at + 4, type) && read_at(elf, at + 0x18, offset) && read_at(elf, at + 0x20, size);
  };
  std::uint32_t ignored = 0, type = 0;
  std::uint64_t names_at = 0, names_size = 0;
  if (!section(shstrndx, &ignored, &type, &names_at, &names_size) || names_at > elf.size() || names_size > elf.size() - names_at)
    return false;
  const std::string names = elf.substr(static_cast<std::size_t>(names_at), static_cast<std::size_t>(names_size));
  constexpr std::uint32_t kNoBits = 8;  // a section that takes memory but no bytes in the file
  for (std::uint16_t i = 0; i < shnum; ++i) {
    std::uint32_t name = 0;
    std::uint64_t offset = 0, size = 0;
    if (!section(i, &name, &type, &offset, &size) || name >= names_size) continue;
    if (type != kNoBits && (offset > elf.size() || size > elf.size() - offset)) continue;
    f(std::string(names.c_str() + name), offset, size);
  }
  return true;
}

}  // namespace

int cubin_register_count(const std::string& elf) {
  // The ".nv.info" section's records, each a format byte and an attribute byte; format 4 carries
  // a 16-bit size and that many bytes, the others a 16-bit value. Attribute 0x2f (the register
  // count) holds a symbol index and the count, 32 bits each.
  int found = -1;
  for_each_section(elf, [&](const std::string& name, std::uint64_t offset, std::uint64_t size) {
    if (name != ".nv.info" || found >= 0) return;
    for (std::size_t at = static_cast<std::size_t>(offset); at + 4 <= offset + size;) {
      const auto format = static_cast<unsigned char>(elf[at]), attribute = static_cast<unsigned char>(elf[at + 1]);
      std::uint16_t value = 0;
      read_at(elf, at + 2, &value);
      if (format != 4) {
        at += 4;
        continue;
      }
      std::uint32_t count = 0;
      if (attribute == 0x2f && value >= 8 && read_at(elf, at + 8, &count)) {
        found = static_cast<int>(count);
        return;
      }
      at += 4 + value;
    }
  });
  return found;
}

std::int64_t cubin_shared_bytes(const std::string& elf) {
  // A kernel's static shared arrays are its ".nv.shared.KERNEL" section (memory, no file bytes).
  // From sm_90 that section also holds the kilobyte the driver reserves in every block, so the
  // figure can exceed ptxas's by 1024: an upper bound, which is what a limit check needs.
  std::int64_t bytes = 0;
  const bool read = for_each_section(elf, [&](const std::string& name, std::uint64_t, std::uint64_t size) {
    if (name.rfind(".nv.shared.", 0) == 0 && name.find("reserved") == std::string::npos) bytes += static_cast<std::int64_t>(size);
  });
  return read ? bytes : -1;
}

CudaArchLimits cuda_arch_limits(int sm) {
  CudaArchLimits l;
  // Every architecture from sm_50 has 64 K registers per block and 255 per thread; static shared
  // memory stays 48 KB per block (more only through dynamic shared memory and an opt-in).
  (void)sm;
  return l;
}

}  // namespace wpk::codegen
