#include "runtime/control_flow.hpp"

#include <algorithm>

#include "graph/subgraph.hpp"
#include "runtime/execution_plan.hpp"
#include "runtime/session_factory.hpp"

namespace wpk {
namespace {

// The innermost scope open on this thread: the options of the bodies being prepared here.
thread_local const BodyOptionsScope* t_body_scope = nullptr;

std::vector<const char*> body_attributes(const Node& node) {
  if (node.op_type == "If") return {"then_branch", "else_branch"};
  return {"body"};
}

// The first node of `g` (or of the graphs nested in it) no backend runs, as "node 'x' (Op): why".
std::string first_unsupported(const Graph& g) {
  for (const UnsupportedNode& u : find_unsupported(g)) return "node '" + u.node + "' (" + u.op_type + "): " + u.reason;
  return "";
}

class IfKernel : public Kernel {
 public:
  explicit IfKernel(const Node& node) : then_(node, "then_branch"), else_(node, "else_branch") {}

  void run(KernelContext& ctx) const override {
    const Tensor& cond = ctx.input(0);
    if (cond.dtype() != DType::Bool || cond.numel() != 1)
      ctx.fail(ErrorCode::InvalidArgument, std::string("cond must be one bool, got ") + dtype_name(cond.dtype()) + " " +
                                               shape_to_string(cond.shape()));
    const Body& branch = cond.data<bool>()[0] ? then_ : else_;
    std::vector<Tensor> captured;
    for (std::size_t i = 1; i < ctx.num_inputs(); ++i) captured.push_back(ctx.input(i));
    std::vector<Tensor> outs = branch.run(captured);
    for (std::size_t o = 0; o < ctx.num_outputs(); ++o)
      if (ctx.wants_output(o)) ctx.set_output(o, std::move(outs[o]));
  }
  std::vector<const Session*> body_sessions() const override { return {&then_.session(), &else_.session()}; }

 private:
  Body then_, else_;
};

}  // namespace

BodyOptionsScope::BodyOptionsScope(const SessionOptions& enclosing)
    : previous_(t_body_scope),
      options_(enclosing),
      compile_choices_(enclosing.tuning || (previous_ && previous_->compile_choices_)) {
  options_.tuning = false;
  options_.fixed_dims.clear();
  options_.profile = false;
  options_.on_tuning_progress = nullptr;
  t_body_scope = this;
}

BodyOptionsScope::~BodyOptionsScope() { t_body_scope = previous_; }

Body::Body(const Node& node, const char* attribute) : where_(node_label(node) + attribute + ": ") {
  const Attribute* a = node.find_attr(attribute);
  if (!a || a->kind() != Attribute::Kind::Graph)
    throw Error(ErrorCode::InvalidModel, node_label(node) + "attribute '" + attribute + "' (a graph) is required");
  const Graph& g = a->g();
  for (ValueId v : g.inputs()) input_names_.push_back(g.value(v).name);
  for (ValueId v : g.outputs()) {
    output_names_.push_back(g.value(v).name);
    output_dtypes_.push_back(g.value(v).dtype);
  }
  const SessionOptions options = t_body_scope ? t_body_scope->options_ : SessionOptions{};
  max_iterations_ = options.max_loop_iterations;
  try {
    session_ = std::make_unique<Session>(Graph(g), options);
  } catch (const Error& e) {
    throw Error(e.code(), where_ + e.what());
  }
  // The optimized body may no longer read some inputs; its outputs keep their names.
  const auto position = [](const std::vector<std::string>& names, const std::string& name) {
    return static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
  };
  for (const ValueInfo& v : session_->inputs()) {
    const std::size_t at = position(input_names_, v.name);
    if (at == input_names_.size()) throw Error(ErrorCode::Internal, where_ + "the optimized body reads an input '" + v.name + "' it did not declare");
    session_inputs_.push_back(at);
  }
  std::vector<std::string> produced;
  for (const ValueInfo& v : session_->outputs()) produced.push_back(v.name);
  for (const std::string& name : output_names_) {
    const std::size_t at = position(produced, name);
    if (at == produced.size()) throw Error(ErrorCode::Internal, where_ + "the optimized body lost its output '" + name + "'");
    session_outputs_.push_back(at);
  }
}

std::vector<Tensor> Body::run(const std::vector<Tensor>& args) const {
  if (args.size() != input_names_.size())
    throw Error(ErrorCode::InvalidModel, where_ + "takes " + std::to_string(input_names_.size()) + " inputs, the node gives " +
                                             std::to_string(args.size()));
  std::vector<Tensor> in;
  in.reserve(session_inputs_.size());
  for (std::size_t at : session_inputs_) in.push_back(args[at]);
  std::vector<Tensor> out;
  try {
    out = SessionFactory::run_in_order(*session_, in);
  } catch (const Error& e) {
    throw Error(e.code(), where_ + e.what());
  }
  std::vector<Tensor> result;
  result.reserve(session_outputs_.size());
  for (std::size_t at : session_outputs_) result.push_back(out[at]);
  return result;
}

std::string ControlFlowBackend::why_unsupported(const Node& node, const Graph& graph) const {
  if (!is_control_flow(node)) return "not a control-flow op";
  if (node.op_type == "Scan" && graph.opset() < 9 && node.inputs.size() > 0 && node.inputs[0] != kNoValue)
    return "Scan's sequence_lens (opset 8) is not supported";
  if (const std::string problem = control_flow_signature_problem(node, graph.opset()); !problem.empty()) return problem;
  for (const char* attr : body_attributes(node)) {
    const std::string why = first_unsupported(node.find_attr(attr)->g());
    if (!why.empty()) return std::string(attr) + ": " + why;
  }
  return "";
}

std::unique_ptr<Kernel> ControlFlowBackend::prepare(const Node& node, const Graph& graph) const {
  if (node.op_type == "If") return std::make_unique<IfKernel>(node);
  if (node.op_type == "Loop") return prepare_loop(node);
  if (node.op_type == "Scan") return prepare_scan(node, graph.opset());
  if (node.op_type == "SequenceMap") return prepare_sequence_map(node);
  throw Error(ErrorCode::Internal, node_label(node) + "not a control-flow op");
}

const ControlFlowBackend& control_flow_backend() {
  static const ControlFlowBackend backend;
  return backend;
}

}  // namespace wpk
