// The backends this build runs. Each one that supports a node offers a candidate; the cost model
// (or, with tuning, measurement) picks among them, and this order breaks its ties. Registered
// here explicitly, guarded by build options, so a static link cannot drop one.
#include "backends/cpu/cpu_backend.hpp"
#include "backends/generated/generated_backend.hpp"
#include "backends/reference/reference_backend.hpp"
#include "runtime/control_flow.hpp"
#include "runtime/execution_plan.hpp"
#include "runtime/group_parts_backend.hpp"
#ifdef WPK_WITH_ONEDNN
#include "backends/onednn/onednn_backend.hpp"
#endif
#ifdef WPK_WITH_CUDA
#include "backends/cuda/cuda_backend.hpp"
#endif

namespace wpk {

std::vector<const Backend*> registered_backends() {
  static const cpu::CpuBackend cpu_backend;
  static const gen::GeneratedBackend generated_backend;
  static const reference::ReferenceBackend reference_backend;
  std::vector<const Backend*> all = {&control_flow_backend(), &cpu_backend};
#ifdef WPK_WITH_ONEDNN
  static const onednn::OneDnnBackend onednn_backend;
  all.push_back(&onednn_backend);
#endif
  all.push_back(&generated_backend);
#ifdef WPK_WITH_CUDA
  static const cuda::CudaBackend cuda_backend;
  all.push_back(&cuda_backend);
#endif
  static const GroupPartsBackend parts_backend;
  all.push_back(&parts_backend);
  all.push_back(&reference_backend);
  return all;
}

}  // namespace wpk
