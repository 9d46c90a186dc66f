// Reference kernels for the com.wpk ops the optimizer creates (graph/fused_ops.hpp).
#include "backends/reference/common.hpp"
#include "backends/reference/registry.hpp"

namespace wpk::reference {

void register_fused(OpTable&) {}

}  // namespace wpk::reference
