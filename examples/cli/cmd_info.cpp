// wpk info MODEL: inputs and outputs with shapes and dtypes, op histogram, unsupported ops.
#include <cstdio>
#include <map>

#include "cli.hpp"

namespace wpk::cli {
namespace {
void print_values(const char* title, const Graph& g, const std::vector<ValueId>& ids) {
  std::printf("%s:\n", title);
  for (ValueId v : ids) {
    const ValueInfo& info = g.value(v);
    std::printf("  %-24s %-8s %s\n", info.name.c_str(), dtype_name(info.dtype),
                info.dims ? dims_to_string(*info.dims).c_str() : "(shape unknown)");
  }
}
}  // namespace

int cmd_info(const Args& args) {
  const Graph g = load(args.positional[0]);
  std::printf("model %s  opset %lld  %zu nodes  %zu initializers\n", args.positional[0].c_str(),
              static_cast<long long>(g.opset()), g.nodes().size(), g.initializers().size());
  print_values("inputs", g, g.inputs());
  print_values("outputs", g, g.outputs());
  std::map<std::string, int> histogram;
  for (const Node& n : g.nodes()) ++histogram[n.domain.empty() ? n.op_type : n.domain + "." + n.op_type];
  std::printf("ops:\n");
  for (const auto& kv : histogram) std::printf("  %-24s %d\n", kv.first.c_str(), kv.second);
  const auto unsupported = find_unsupported(g);
  std::map<std::string, std::string> by_op;
  for (const auto& u : unsupported) by_op.emplace(u.op_type, u.reason);
  std::printf("unsupported ops: %s\n", by_op.empty() ? "none" : "");
  for (const auto& kv : by_op) std::printf("  %-24s %s\n", kv.first.c_str(), kv.second.c_str());
  return 0;
}

}  // namespace wpk::cli
