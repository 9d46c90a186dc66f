#pragma once
// The CUDA driver, cuBLAS and cuDNN, loaded at run time (dlopen): libwpk links and runs on
// machines without a GPU, a driver or these libraries, and a session that asks for CUDA there
// gets a clear error. The toolkit's headers give the types; nothing is linked. Where from:
// libcuda.so.1 from the loader's path (the driver installs it there); libcublas.so.13,
// libcublasLt.so.13 and libcudnn.so.9 from the loader's path, else /usr/local/cuda/lib64 and /usr/local/cuda/lib.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cudnn.h>

#include <string>

#include "wpk/error.hpp"

namespace wpk::cuda {

#define WPK_CUDA_DRIVER_FUNCTIONS(X)                                                                              \
  X(Init, cuInit) X(DriverGetVersion, cuDriverGetVersion) X(GetErrorString, cuGetErrorString)                    \
  X(DeviceGetCount, cuDeviceGetCount) X(DeviceGet, cuDeviceGet) X(DeviceGetName, cuDeviceGetName)                \
  X(DeviceGetAttribute, cuDeviceGetAttribute) X(DeviceTotalMem, cuDeviceTotalMem_v2)                             \
  X(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain) X(CtxSetCurrent, cuCtxSetCurrent)                          \
  X(MemAlloc, cuMemAlloc_v2) X(MemFree, cuMemFree_v2) X(MemGetInfo, cuMemGetInfo_v2)                             \
  X(MemcpyHtoDAsync, cuMemcpyHtoDAsync_v2) X(MemcpyDtoHAsync, cuMemcpyDtoHAsync_v2)                              \
  X(MemcpyHtoD, cuMemcpyHtoD_v2) X(MemcpyDtoH, cuMemcpyDtoH_v2)                                                  \
  X(MemcpyDtoDAsync, cuMemcpyDtoDAsync_v2) X(Memcpy2DAsync, cuMemcpy2DAsync_v2) X(MemsetD32Async, cuMemsetD32Async) \
  X(StreamCreate, cuStreamCreate) X(StreamDestroy, cuStreamDestroy_v2) X(StreamSynchronize, cuStreamSynchronize) \
  X(EventCreate, cuEventCreate) X(EventDestroy, cuEventDestroy_v2) X(EventRecord, cuEventRecord)                 \
  X(EventSynchronize, cuEventSynchronize) X(EventElapsedTime, cuEventElapsedTime_v2)                             \
  X(ModuleLoadData, cuModuleLoadData) X(ModuleUnload, cuModuleUnload) X(ModuleGetFunction, cuModuleGetFunction)  \
  X(LaunchKernel, cuLaunchKernel) X(StreamBeginCapture, cuStreamBeginCapture_v2) X(StreamEndCapture, cuStreamEndCapture) \
  X(GraphInstantiate, cuGraphInstantiateWithFlags) X(GraphLaunch, cuGraphLaunch) X(GraphExecDestroy, cuGraphExecDestroy)     \
  X(GraphDestroy, cuGraphDestroy)

#define WPK_CUBLAS_FUNCTIONS(X)                                                                       \
  X(Create, cublasCreate_v2) X(Destroy, cublasDestroy_v2) X(SetStream, cublasSetStream_v2)          \
  X(SetMathMode, cublasSetMathMode) X(GetVersion, cublasGetVersion_v2) X(Sgemm, cublasSgemm_v2)     \
  X(SgemmStridedBatched, cublasSgemmStridedBatched) X(SetWorkspace, cublasSetWorkspace_v2)

#define WPK_CUBLASLT_FUNCTIONS(X)                                                                             \
  X(Create, cublasLtCreate) X(Destroy, cublasLtDestroy) X(MatmulDescCreate, cublasLtMatmulDescCreate)        \
  X(MatmulDescDestroy, cublasLtMatmulDescDestroy) X(MatmulDescSetAttribute, cublasLtMatmulDescSetAttribute)  \
  X(MatrixLayoutCreate, cublasLtMatrixLayoutCreate) X(MatrixLayoutDestroy, cublasLtMatrixLayoutDestroy)      \
  X(MatrixLayoutSetAttribute, cublasLtMatrixLayoutSetAttribute)                                               \
  X(MatmulPreferenceCreate, cublasLtMatmulPreferenceCreate) X(MatmulPreferenceDestroy, cublasLtMatmulPreferenceDestroy) \
  X(MatmulPreferenceSetAttribute, cublasLtMatmulPreferenceSetAttribute)                                       \
  X(MatmulAlgoGetHeuristic, cublasLtMatmulAlgoGetHeuristic) X(Matmul, cublasLtMatmul)

#define WPK_CUDNN_FUNCTIONS(X)                                                                                     \
  X(GetVersion, cudnnGetVersion) X(GetErrorString, cudnnGetErrorString) X(Create, cudnnCreate)                    \
  X(Destroy, cudnnDestroy) X(SetStream, cudnnSetStream) X(CreateTensorDescriptor, cudnnCreateTensorDescriptor)    \
  X(DestroyTensorDescriptor, cudnnDestroyTensorDescriptor) X(SetTensorNdDescriptor, cudnnSetTensorNdDescriptor)   \
  X(CreateFilterDescriptor, cudnnCreateFilterDescriptor) X(DestroyFilterDescriptor, cudnnDestroyFilterDescriptor) \
  X(SetFilterNdDescriptor, cudnnSetFilterNdDescriptor)                                                            \
  X(CreateConvolutionDescriptor, cudnnCreateConvolutionDescriptor)                                                \
  X(DestroyConvolutionDescriptor, cudnnDestroyConvolutionDescriptor)                                              \
  X(SetConvolutionNdDescriptor, cudnnSetConvolutionNdDescriptor) X(SetConvolutionGroupCount, cudnnSetConvolutionGroupCount) \
  X(SetConvolutionMathType, cudnnSetConvolutionMathType)                                                          \
  X(FindConvolutionForwardAlgorithmEx, cudnnFindConvolutionForwardAlgorithmEx)                                    \
  X(GetConvolutionForwardWorkspaceSize, cudnnGetConvolutionForwardWorkspaceSize)                                  \
  X(ConvolutionForward, cudnnConvolutionForward) X(CreatePoolingDescriptor, cudnnCreatePoolingDescriptor)         \
  X(DestroyPoolingDescriptor, cudnnDestroyPoolingDescriptor) X(SetPoolingNdDescriptor, cudnnSetPoolingNdDescriptor) \
  X(PoolingForward, cudnnPoolingForward) X(SoftmaxForward, cudnnSoftmaxForward)                                   \
  X(ConvolutionBiasActivationForward, cudnnConvolutionBiasActivationForward)                                      \
  X(CreateActivationDescriptor, cudnnCreateActivationDescriptor) X(SetActivationDescriptor, cudnnSetActivationDescriptor) \
  X(DestroyActivationDescriptor, cudnnDestroyActivationDescriptor)                                               \
  X(BackendCreateDescriptor, cudnnBackendCreateDescriptor) X(BackendDestroyDescriptor, cudnnBackendDestroyDescriptor) \
  X(BackendSetAttribute, cudnnBackendSetAttribute) X(BackendGetAttribute, cudnnBackendGetAttribute)               \
  X(BackendFinalize, cudnnBackendFinalize) X(BackendExecute, cudnnBackendExecute)

#define WPK_CUDA_DECLARE(name, symbol) decltype(&::symbol) name = nullptr;
struct DriverApi { WPK_CUDA_DRIVER_FUNCTIONS(WPK_CUDA_DECLARE) };
struct CublasApi { WPK_CUBLAS_FUNCTIONS(WPK_CUDA_DECLARE) };
struct CublasLtApi { WPK_CUBLASLT_FUNCTIONS(WPK_CUDA_DECLARE) };
struct CudnnApi { WPK_CUDNN_FUNCTIONS(WPK_CUDA_DECLARE) };
#undef WPK_CUDA_DECLARE

// Each loaded once per process. Throws Error(Unsupported) saying what is missing.
const DriverApi& driver();
const CublasApi& cublas();
const CublasLtApi& cublaslt();
const CudnnApi& cudnn();
// "" when the driver loads and reports a device; otherwise why not (no throw).
std::string why_no_cuda_device();

// Throws Error(Internal or ResourceExhausted) naming `what` and the library's message.
void check(CUresult r, const std::string& what);
void check(cublasStatus_t s, const std::string& what);
void check(cudnnStatus_t s, const std::string& what);

}  // namespace wpk::cuda
