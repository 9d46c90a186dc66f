#include "backends/cuda/cuda_api.hpp"

#include <dlfcn.h>

#include <vector>

namespace wpk::cuda {
namespace {

void* open_first(const std::vector<std::string>& names, std::string& why) {
  for (const auto& n : names)
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  const char* err = dlerror();
  why = names.front() + " not found" + (err ? std::string(" (") + err + ")" : std::string());
  return nullptr;
}

std::vector<std::string> toolkit_names(const std::string& soname) {
  return {soname, "/usr/local/cuda/lib64/" + soname, "/usr/local/cuda/lib/" + soname};
}

template <typename Api>
struct Loaded {
  Api api;
  std::string why;  // empty when loaded
};

#define WPK_CUDA_BIND(name, symbol)                                                       \
  if (l.why.empty()) {                                                                    \
    l.api.name = reinterpret_cast<decltype(l.api.name)>(dlsym(lib, #symbol));             \
    if (!l.api.name) l.why = std::string(library) + " lacks " #symbol " (too old a release)"; \
  }

const Loaded<DriverApi>& loaded_driver() {
  static const Loaded<DriverApi> loaded = [] {
    Loaded<DriverApi> l;
    const char* library = "libcuda.so.1";
    void* lib = open_first({library}, l.why);
    if (!lib) {
      l.why = "no CUDA driver on this machine: " + l.why;
      return l;
    }
    WPK_CUDA_DRIVER_FUNCTIONS(WPK_CUDA_BIND)
    return l;
  }();
  return loaded;
}

// A toolkit library (cuBLAS, cuDNN): opened where the toolkit puts it, then `bind` fills the table.
template <typename Api, typename Bind>
Loaded<Api> load_toolkit_library(const char* library, Bind bind) {
  Loaded<Api> l;
  if (void* lib = open_first(toolkit_names(library), l.why)) bind(l, lib, library);
  return l;
}

const Loaded<CublasApi>& loaded_cublas() {
  static const Loaded<CublasApi> loaded = load_toolkit_library<CublasApi>(
      "libcublas.so.13", [](Loaded<CublasApi>& l, void* lib, const char* library) { WPK_CUBLAS_FUNCTIONS(WPK_CUDA_BIND) });
  return loaded;
}

const Loaded<CublasLtApi>& loaded_cublaslt() {
  static const Loaded<CublasLtApi> loaded = load_toolkit_library<CublasLtApi>(
      "libcublasLt.so.13", [](Loaded<CublasLtApi>& l, void* lib, const char* library) { WPK_CUBLASLT_FUNCTIONS(WPK_CUDA_BIND) });
  return loaded;
}

const Loaded<CudnnApi>& loaded_cudnn() {
  static const Loaded<CudnnApi> loaded = load_toolkit_library<CudnnApi>(
      "libcudnn.so.9", [](Loaded<CudnnApi>& l, void* lib, const char* library) { WPK_CUDNN_FUNCTIONS(WPK_CUDA_BIND) });
  return loaded;
}
#undef WPK_CUDA_BIND

template <typename Api>
const Api& require(const Loaded<Api>& l) {
  if (!l.why.empty()) throw Error(ErrorCode::Unsupported, "CUDA: " + l.why);
  return l.api;
}

}  // namespace

const DriverApi& driver() { return require(loaded_driver()); }
const CublasApi& cublas() { return require(loaded_cublas()); }
const CublasLtApi& cublaslt() { return require(loaded_cublaslt()); }
const CudnnApi& cudnn() { return require(loaded_cudnn()); }

std::string why_no_cuda_device() {
  const auto& l = loaded_driver();
  if (!l.why.empty()) return l.why;
  static const std::string reason = [&l]() -> std::string {
    if (CUresult r = l.api.Init(0); r != CUDA_SUCCESS) {
      const char* s = nullptr;
      l.api.GetErrorString(r, &s);
      return std::string("the CUDA driver would not start: ") + (s ? s : "unknown error");
    }
    int n = 0;
    if (l.api.DeviceGetCount(&n) != CUDA_SUCCESS || n == 0) return "the CUDA driver sees no device";
    return "";
  }();
  return reason;
}

void check(CUresult r, const std::string& what) {
  if (r == CUDA_SUCCESS) return;
  const char* s = nullptr;
  if (driver().GetErrorString(r, &s) != CUDA_SUCCESS) s = nullptr;
  throw Error(r == CUDA_ERROR_OUT_OF_MEMORY ? ErrorCode::ResourceExhausted : ErrorCode::Internal,
              "CUDA: " + what + ": " + (s ? s : "error " + std::to_string(static_cast<int>(r))));
}

void check(cublasStatus_t s, const std::string& what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw Error(s == CUBLAS_STATUS_ALLOC_FAILED ? ErrorCode::ResourceExhausted : ErrorCode::Internal,
              "cuBLAS: " + what + ": status " + std::to_string(static_cast<int>(s)));
}

void check(cudnnStatus_t s, const std::string& what) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  throw Error(s == CUDNN_STATUS_ALLOC_FAILED ? ErrorCode::ResourceExhausted : ErrorCode::Internal,
              "cuDNN: " + what + ": " + cudnn().GetErrorString(s));
}

}  // namespace wpk::cuda
