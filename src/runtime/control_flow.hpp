#pragma once
// If, Loop, Scan and SequenceMap. Each body (a Graph attribute, made self-contained by the import: see
// graph/subgraph.hpp) runs as a Session of its own, optimized and planned like the main graph,
// made when the node's kernel is prepared with the enclosing session's options. A body's run
// happens on the runner thread of the run that reaches the node (nested runs do not queue for
// CPUs their enclosing run already holds) and answers to that run's RunOptions.
#include <memory>
#include <string>
#include <vector>

#include "backends/kernel.hpp"
#include "wpk/session.hpp"

namespace wpk {

class ControlFlowBackend : public Backend {
 public:
  std::string name() const override { return "control"; }
  std::string why_unsupported(const Node& node, const Graph& graph) const override;
  std::unique_ptr<Kernel> prepare(const Node& node, const Graph& graph) const override;
  // A body runs on its own session's threads, whatever the node is given.
  bool uses_host_threads() const override { return false; }
};

const ControlFlowBackend& control_flow_backend();

// While a session prepares its plan: the options its bodies' sessions take (its own, without
// tuning at load, fixed dims or profiling, which name its graph).
class BodyOptionsScope {
 public:
  explicit BodyOptionsScope(const SessionOptions& enclosing);
  ~BodyOptionsScope();
  BodyOptionsScope(const BodyOptionsScope&) = delete;
  BodyOptionsScope& operator=(const BodyOptionsScope&) = delete;
  // Whether the session that opened this scope tunes, or is a body (at any depth) of one that
  // does: its plan compiles the generated kernels it chooses at load (PlanOptions::compile_choices).
  bool compiles_choices_at_load() const { return compile_choices_; }

 private:
  friend class Body;  // a body's session takes the innermost scope's options
  const BodyOptionsScope* previous_;
  SessionOptions options_;
  bool compile_choices_ = false;
};

// One body: its session, and its inputs and outputs in the order the node binds them.
class Body {
 public:
  Body(const Node& node, const char* attribute);
  std::size_t output_count() const { return output_names_.size(); }
  DType output_dtype(std::size_t i) const { return output_dtypes_[i]; }
  // Runs the body on `args` (one per input, in order) and returns its outputs in order.
  std::vector<Tensor> run(const std::vector<Tensor>& args) const;
  std::int64_t max_iterations() const { return max_iterations_; }
  const Session& session() const { return *session_; }

 private:
  std::string where_;  // "node 'x' (Loop) body: "
  std::vector<std::string> input_names_;
  std::vector<std::size_t> session_inputs_;   // per input of the session, the argument it takes
  std::vector<std::string> output_names_;
  std::vector<std::size_t> session_outputs_;  // per output of the body, the session's output it is
  std::vector<DType> output_dtypes_;
  std::unique_ptr<Session> session_;
  std::int64_t max_iterations_ = 0;
};

// The Loop, Scan and SequenceMap kernels (control_flow_loops.cpp).
std::unique_ptr<Kernel> prepare_loop(const Node& node);
std::unique_ptr<Kernel> prepare_scan(const Node& node, std::int64_t opset);
std::unique_ptr<Kernel> prepare_sequence_map(const Node& node);

}  // namespace wpk
