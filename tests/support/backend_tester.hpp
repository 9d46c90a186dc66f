#pragma once
// A fluent tester for one op on one backend against the reference backend:
//
//   OpCase("FusedConv", "com.wpk").input("X", {1, 16, 7, 7}).constant("W", {8, 16, 3, 3})
//       .attr("pads", {1, 1, 1, 1}).check(backend);
//
// Inputs and constants get uniform random values from a fixed seed; outputs are written into
// buffers with guard bytes on both sides, so an out-of-bounds write fails the case.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/kernel.hpp"
#include "codegen/jit/kernel_store.hpp"

namespace wpk::testing {

class OpCase {
 public:
  OpCase(std::string op, std::string domain = "");
  OpCase& input(const std::string& name, Shape shape);
  // A run-time input of this exact value (any dtype): 8-bit codes, ties, NaN, ...
  OpCase& input(const std::string& name, Tensor value);
  OpCase& constant(const std::string& name, Shape shape);
  OpCase& constant(const std::string& name, Tensor value);
  OpCase& omitted();  // an omitted optional input
  OpCase& attr(const std::string& key, Attribute value);
  // A fused op's `activation` attribute, with fixed test parameters for the kinds that take
  // them (Clip [-0.3, 0.4], LeakyRelu [0.1]); "" for none.
  OpCase& activation(const std::string& kind);
  OpCase& seed(unsigned s);
  // Runs on `backend` and on the reference; "" when outputs match within rtol/atol, else why.
  // The case must be supported by `backend`, and its kernel must run these inputs (a case it
  // declines either way is reported as a failure).
  std::string check(const Backend& backend, double rtol = 1e-4, double atol = 1e-5) const;
  // The same for one of the backend's configurations (Backend::configs). A generated kernel
  // (Kernel::source) gets its code from `code`, or, unset, is compiled alone.
  using CodeProvider = std::function<void(Kernel&)>;
  std::string check(const Backend& backend, const std::string& config, double rtol, double atol,
                    const CodeProvider& code = {}) const;
  // The kernel check() runs, as the backend prepares it (a generated one without its code).
  std::unique_ptr<Kernel> prepare(const Backend& backend, const std::string& config) const;
  // What the backend offers for this case: configs() when it supports it, else nothing.
  std::vector<std::string> configs(const Backend& backend) const;
  std::string describe() const;
  // The one-node graph of this case (node "case", output "Y") and its run-time input values.
  Graph build(std::map<std::string, Tensor>& values) const;

 private:

  std::string op_, domain_;
  std::vector<std::string> order_;  // input names in order; "" for omitted
  std::map<std::string, Shape> runtime_inputs_;
  std::map<std::string, Tensor> runtime_values_;
  std::map<std::string, Tensor> constants_;
  std::map<std::string, Attribute> attrs_;
  unsigned seed_ = 1;
};

// Generated kernels' code for many cases at once: add() their sources, compile() them in one
// batch (as a session does), then give() each kernel its code.
class GeneratedCode {
 public:
  void add(const Kernel& kernel);
  // "" when every source compiled, else the first failure.
  std::string compile(int parallel);
  void give(Kernel& kernel) const;
  std::size_t size() const { return sources_.size(); }

 private:
  std::map<std::string, std::size_t> index_;  // by store key
  std::vector<codegen::KernelSource> sources_;
  std::vector<std::shared_ptr<const codegen::LoadedKernel>> code_;
};

}  // namespace wpk::testing
