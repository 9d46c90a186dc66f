#include "backends/cuda/device.hpp"

#include <algorithm>
#include <memory>
#include <vector>

namespace wpk::cuda {

Device::Device() {
  if (std::string why = why_no_cuda_device(); !why.empty()) throw Error(ErrorCode::Unsupported, "CUDA: " + why);
  const DriverApi& d = driver();
  check(d.DeviceGet(&device_, 0), "cuDeviceGet");
  char name[256] = {};
  check(d.DeviceGetName(name, sizeof name - 1, device_), "cuDeviceGetName");
  info_.name = name;
  int major = 0, minor = 0;
  check(d.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_), "compute capability");
  check(d.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_), "compute capability");
  info_.sm = major * 10 + minor;
  check(d.DeviceGetAttribute(&info_.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device_), "multiprocessors");
  std::size_t memory = 0;
  check(d.DeviceTotalMem(&memory, device_), "cuDeviceTotalMem");
  info_.memory_bytes = static_cast<std::int64_t>(memory);
  check(d.DriverGetVersion(&info_.driver_version), "cuDriverGetVersion");
  int khz = 0;
  check(d.DeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, device_), "clock rate");
  info_.clock_hz = khz * 1e3;
  check(d.DeviceGetAttribute(&info_.shared_bytes_per_multiprocessor, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
                             device_),
        "shared memory");
  check(d.DevicePrimaryCtxRetain(&context_, device_), "retaining the device's primary context");
}

search::GpuSpec gpu_spec_of(const DeviceInfo& info) {
  if (const search::GpuSpec* known = search::gpu_spec(info.name)) return *known;
  search::GpuSpec s;
  s.name = info.name;
  s.sm = info.sm;
  s.multiprocessors = info.multiprocessors;
  s.clock_hz = info.clock_hz > 0 ? info.clock_hz : 1.5e9;
  s.fp32_lanes = info.sm >= 86 ? 128 : 64;  // GA10x, Ada and Hopper: 128; Volta, Turing, GA100: 64
  s.memory_bytes_per_second = 1e12;
  s.shared_bytes = info.shared_bytes_per_multiprocessor;
  return s;
}

const Device& Device::get() {
  static const Device device;  // a throw leaves it unmade: the next call tries again
  device.activate();
  return device;
}

void Device::activate() const { check(driver().CtxSetCurrent(context_), "cuCtxSetCurrent"); }

DeviceBuffer::DeviceBuffer(std::size_t bytes, const std::string& what) : bytes_(bytes) {
  if (bytes == 0) return;
  check(driver().MemAlloc(&ptr_, bytes), "allocating " + std::to_string(bytes) + " bytes for " + what);
}

namespace {

// Before freeing on a thread that may never have used the device: its context current, quietly
// (destructors do not throw).
void activate_for_teardown() {
  try {
    Device::get();
  } catch (...) {
  }
}

}  // namespace

DeviceBuffer::~DeviceBuffer() {
  if (!ptr_) return;
  activate_for_teardown();
  driver().MemFree(ptr_);
}

Tensor device_tensor(DType dtype, const Shape& shape, const std::string& what) {
  auto buffer = std::make_shared<DeviceBuffer>(static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype), what);
  void* address = reinterpret_cast<void*>(static_cast<std::uintptr_t>(buffer->get()));
  return Tensor::wrap_device(std::move(buffer), address, dtype, shape);
}

Tensor copy_to_host(const Tensor& device) {
  Device::get();
  Tensor host = Tensor::zeros(device.dtype(), device.shape());
  if (host.nbytes())
    check(driver().MemcpyDtoH(host.raw(), static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(device.raw())), host.nbytes()),
          "copying a device tensor to the host");
  return host;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) activate_for_teardown(), driver().MemFree(ptr_);
    ptr_ = o.ptr_, bytes_ = o.bytes_;
    o.ptr_ = 0, o.bytes_ = 0;
  }
  return *this;
}

StreamHandles::StreamHandles() {
  Device::get();
  check(driver().StreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  try {
    check(cublas().Create(&blas_), "cublasCreate");
    check(cublas().SetStream(blas_, stream_), "cublasSetStream");
    // float32 stays float32: no TF32 tensor-core rounding unless a precision option asks for it.
    check(cublas().SetMathMode(blas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    // A workspace of its own, so that captured GEMMs allocate nothing (CapturedWork).
    blas_workspace_ = DeviceBuffer(kBlasWorkspace, "cuBLAS's workspace");
    check(cublas().SetWorkspace(blas_, reinterpret_cast<void*>(blas_workspace_.get()), kBlasWorkspace), "cublasSetWorkspace");
    check(cublaslt().Create(&lt_), "cublasLtCreate");
    check(cudnn().Create(&dnn_), "cudnnCreate");
    check(cudnn().SetStream(dnn_, stream_), "cudnnSetStream");
  } catch (...) {
    release();
    throw;
  }
}

StreamHandles::~StreamHandles() { release(); }

void StreamHandles::release() {
  if (stream_) activate_for_teardown();
  if (dnn_) cudnn().Destroy(dnn_);
  if (lt_) cublaslt().Destroy(lt_);
  if (blas_) cublas().Destroy(blas_);
  if (stream_) driver().StreamDestroy(stream_);
  dnn_ = nullptr, lt_ = nullptr, blas_ = nullptr, stream_ = nullptr;
}

void StreamHandles::synchronize(const std::string& what) const { check(driver().StreamSynchronize(stream_), what); }

CapturedWork::CapturedWork(const StreamHandles& h, const std::function<void()>& launch, int repeats) {
  launch();
  h.synchronize("running work before capturing it");
  check(driver().StreamBeginCapture(h.stream(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "beginning a capture");
  try {
    for (int r = 0; r < repeats; ++r) launch();
  } catch (...) {
    CUgraph broken = nullptr;
    driver().StreamEndCapture(h.stream(), &broken);
    if (broken) driver().GraphDestroy(broken);
    throw;
  }
  check(driver().StreamEndCapture(h.stream(), &graph_), "ending a capture");
  if (CUresult r = driver().GraphInstantiate(&exec_, graph_, 0); r != CUDA_SUCCESS) {
    driver().GraphDestroy(graph_);
    check(r, "instantiating a captured graph");
  }
}

CapturedWork::~CapturedWork() {
  if (exec_ || graph_) activate_for_teardown();
  if (exec_) driver().GraphExecDestroy(exec_);
  if (graph_) driver().GraphDestroy(graph_);
}

void CapturedWork::launch(CUstream stream) const { check(driver().GraphLaunch(exec_, stream), "launching a captured graph"); }

namespace {

double median_event_seconds(const StreamHandles& h, const std::function<void()>& launch, int runs) {
  CUevent start = nullptr, stop = nullptr;
  check(driver().EventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
  check(driver().EventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
  std::vector<double> seconds;
  try {
    launch();
    for (int r = 0; r < runs; ++r) {
      check(driver().EventRecord(start, h.stream()), "cuEventRecord");
      launch();
      check(driver().EventRecord(stop, h.stream()), "cuEventRecord");
      check(driver().EventSynchronize(stop), "timing a kernel");
      float ms = 0;
      check(driver().EventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
      seconds.push_back(ms * 1e-3);
    }
  } catch (...) {
    driver().EventDestroy(start);
    driver().EventDestroy(stop);
    throw;
  }
  driver().EventDestroy(start);
  driver().EventDestroy(stop);
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

double median_launch_seconds(const StreamHandles& h, const std::function<void()>& launch, int runs) {
  constexpr int kRepeats = 10;
  std::unique_ptr<CapturedWork> captured;
  try {
    captured = std::make_unique<CapturedWork>(h, launch, kRepeats);
  } catch (const Error&) {
    return median_event_seconds(h, launch, runs);
  }
  return median_event_seconds(h, [&] { captured->launch(h.stream()); }, runs) / kRepeats;
}

LoadedModule::LoadedModule(const std::string& cubin, const std::string& symbol) {
  Device::get();
  check(driver().ModuleLoadData(&module_, cubin.data()), "loading the cubin of " + symbol);
  if (CUresult r = driver().ModuleGetFunction(&function_, module_, symbol.c_str()); r != CUDA_SUCCESS) {
    driver().ModuleUnload(module_);
    check(r, "finding " + symbol + " in its cubin");
  }
}

LoadedModule::~LoadedModule() {
  if (!module_) return;
  activate_for_teardown();
  driver().ModuleUnload(module_);
}

}  // namespace wpk::cuda
