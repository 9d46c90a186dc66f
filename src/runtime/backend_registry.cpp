// The backends this build runs, in order of preference: the first that supports a node is the
// default choice (tuning may pick another). Registered here explicitly, guarded by build
// options, so a static link cannot drop one.
#include "backends/reference/reference_backend.hpp"
#include "runtime/execution_plan.hpp"
#ifdef WPK_WITH_ONEDNN
#include "backends/onednn/onednn_backend.hpp"
#endif

namespace wpk {

std::vector<const Backend*> registered_backends() {
  static const reference::ReferenceBackend reference_backend;
#ifdef WPK_WITH_ONEDNN
  static const onednn::OneDnnBackend onednn_backend;
  return {&onednn_backend, &reference_backend};
#else
  return {&reference_backend};
#endif
}

std::vector<const Backend*> tuning_backends() {
  std::vector<const Backend*> backends = registered_backends();
#ifdef WPK_WITH_ONEDNN
  static const onednn::OneDnnDirectConvBackend direct_conv_backend;
  backends.insert(backends.begin() + 1, &direct_conv_backend);
#endif
  return backends;
}

}  // namespace wpk
