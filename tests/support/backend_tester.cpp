#include "backend_tester.hpp"

#include <cstring>
#include <random>
#include <sstream>

#include "backends/reference/reference_backend.hpp"
#include "codegen/jit/kernel_store.hpp"
#include "tensor_compare.hpp"

namespace wpk::testing {
namespace {

constexpr std::size_t kGuardBytes = 256;
constexpr unsigned char kGuard = 0xA5;

Tensor random_tensor(const Shape& shape, std::mt19937& rng) {
  Tensor t = Tensor::zeros(DType::Float32, shape);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// Output buffers surrounded by guard bytes; `intact()` says whether a kernel wrote outside.
struct GuardedAllocator {
  std::vector<std::shared_ptr<std::vector<unsigned char>>> blocks;

  Tensor allocate(DType dtype, const Shape& shape) {
    const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
    auto block = std::make_shared<std::vector<unsigned char>>(bytes + 2 * kGuardBytes + 64, kGuard);
    blocks.push_back(block);
    // Keep the data 64-byte aligned like the arena does.
    auto addr = reinterpret_cast<std::uintptr_t>(block->data() + kGuardBytes);
    const std::size_t shift = (64 - addr % 64) % 64;
    unsigned char* data = block->data() + kGuardBytes + shift;
    std::memset(data, 0xFF, bytes);  // poison: kernels must write every element
    return Tensor::borrow(static_cast<void*>(data), dtype, shape);
  }

  bool intact(const std::vector<Tensor>& outs) const {
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      const auto& block = *blocks[b];
      const auto* data = static_cast<const unsigned char*>(outs[b].raw());
      const std::size_t begin = static_cast<std::size_t>(data - block.data());
      for (std::size_t i = 0; i < begin; ++i)
        if (block[i] != kGuard) return false;
      for (std::size_t i = begin + outs[b].nbytes(); i < block.size(); ++i)
        if (block[i] != kGuard) return false;
    }
    return true;
  }
};

}  // namespace

OpCase::OpCase(std::string op, std::string domain) : op_(std::move(op)), domain_(std::move(domain)) {}

OpCase& OpCase::input(const std::string& name, Shape shape) {
  order_.push_back(name);
  runtime_inputs_[name] = std::move(shape);
  return *this;
}

OpCase& OpCase::input(const std::string& name, Tensor value) {
  order_.push_back(name);
  runtime_values_[name] = std::move(value);
  return *this;
}

OpCase& OpCase::constant(const std::string& name, Shape shape) {
  std::mt19937 rng(seed_ * 7919u + static_cast<unsigned>(order_.size()));
  return constant(name, random_tensor(shape, rng));
}

OpCase& OpCase::constant(const std::string& name, Tensor value) {
  order_.push_back(name);
  constants_[name] = std::move(value);
  return *this;
}

OpCase& OpCase::omitted() {
  order_.push_back("");
  return *this;
}

OpCase& OpCase::attr(const std::string& key, Attribute value) {
  attrs_.insert_or_assign(key, std::move(value));
  return *this;
}

OpCase& OpCase::activation(const std::string& kind) {
  attr("activation", kind);
  if (kind == "Clip") attr("activation_params", std::vector<float>{-0.3f, 0.4f});
  if (kind == "LeakyRelu") attr("activation_params", std::vector<float>{0.1f});
  if (kind == "HardSigmoid") attr("activation_params", std::vector<float>{0.7f, 0.4f});  // clamps at both ends
  return *this;
}

OpCase& OpCase::seed(unsigned s) {
  seed_ = s;
  return *this;
}

std::string OpCase::describe() const {
  std::ostringstream s;
  s << (domain_.empty() ? "" : domain_ + ".") << op_ << "(";
  for (const auto& name : order_) {
    if (name.empty()) s << "-, ";
    else if (runtime_inputs_.count(name)) s << name << shape_to_string(runtime_inputs_.at(name)) << ", ";
    else if (runtime_values_.count(name))
      s << name << "=" << dtype_name(runtime_values_.at(name).dtype()) << shape_to_string(runtime_values_.at(name).shape()) << ", ";
    else s << name << "=const" << shape_to_string(constants_.at(name).shape()) << ", ";
  }
  s << ")";
  for (const auto& kv : attrs_) {
    s << " " << kv.first << "=";
    switch (kv.second.kind()) {
      case Attribute::Kind::Int: s << kv.second.i(); break;
      case Attribute::Kind::Float: s << kv.second.f(); break;
      case Attribute::Kind::String: s << "'" << kv.second.s() << "'"; break;
      case Attribute::Kind::Ints: s << shape_to_string(kv.second.ints()); break;
      default: s << "..."; break;
    }
  }
  return s.str();
}

Graph OpCase::build(std::map<std::string, Tensor>& values) const {
  Graph g;
  std::mt19937 rng(seed_);
  std::vector<std::string> ins;
  for (const auto& name : order_) {
    ins.push_back(name);
    if (name.empty()) continue;
    if (runtime_inputs_.count(name)) {
      const Shape& s = runtime_inputs_.at(name);
      g.add_input(name, DType::Float32, DimList(s.begin(), s.end()));
      values[name] = random_tensor(s, rng);
    } else if (runtime_values_.count(name)) {
      const Tensor& v = runtime_values_.at(name);
      g.add_input(name, v.dtype(), DimList(v.shape().begin(), v.shape().end()));
      values[name] = v;
    } else {
      g.add_initializer(name, constants_.at(name));
    }
  }
  Node& node = g.add_node(op_, ins, {"Y"}, attrs_, "case");
  node.domain = domain_;
  g.add_output("Y");
  return g;
}

std::vector<std::string> OpCase::configs(const Backend& backend) const {
  std::map<std::string, Tensor> values;
  const Graph g = build(values);
  if (!backend.why_unsupported(g.nodes().front(), g).empty()) return {};
  return backend.configs(g.nodes().front(), g);
}

std::string OpCase::check(const Backend& backend, double rtol, double atol) const { return check(backend, "", rtol, atol); }

std::unique_ptr<Kernel> OpCase::prepare(const Backend& backend, const std::string& config) const {
  std::map<std::string, Tensor> values;
  const Graph g = build(values);
  return backend.prepare(g.nodes().front(), g, config);
}

std::string OpCase::check(const Backend& backend, const std::string& config, double rtol, double atol,
                          const CodeProvider& code) const {
  std::map<std::string, Tensor> values;
  const Graph g = build(values);
  const Node n = g.nodes().front();

  const std::string why = backend.why_unsupported(n, g);
  if (!why.empty()) return backend.name() + " declines " + describe() + ": " + why;
  std::vector<const Tensor*> ptrs;
  for (ValueId v : n.inputs) {
    if (v == kNoValue) ptrs.push_back(nullptr);
    else if (const Tensor* c = g.initializer(v)) ptrs.push_back(c);
    else ptrs.push_back(&values.at(g.value(v).name));
  }
  reference::ReferenceBackend ref;
  KernelContext expected_ctx(n, ptrs);
  ref.prepare(n, g)->run(expected_ctx);

  auto guard = std::make_shared<GuardedAllocator>();
  KernelContext actual_ctx(n, ptrs, [guard](DType d, const Shape& s) { return guard->allocate(d, s); });
  const auto kernel = backend.prepare(n, g, config);
  if (kernel->source()) {
    if (code) {
      code(*kernel);
    } else {
      GeneratedCode alone;
      alone.add(*kernel);
      const std::string failed = alone.compile(1);
      if (!failed.empty()) return failed;
      alone.give(*kernel);
    }
  }
  if (!kernel->runs(ptrs)) return backend.name() + "'s kernel declines the inputs of " + describe() + " (Kernel::runs)";
  kernel->run(actual_ctx);
  if (!guard->intact(actual_ctx.outputs())) return describe() + ": wrote outside its output";
  const std::string diff = compare_allclose(actual_ctx.outputs()[0], expected_ctx.outputs()[0], rtol, atol);
  return diff.empty() ? "" : describe() + ": " + diff;
}

namespace {

codegen::KernelStore& test_store() {
  static codegen::KernelStore store("", codegen::find_host_compiler());
  return store;
}

}  // namespace

void GeneratedCode::add(const Kernel& kernel) {
  const codegen::KernelSource* src = kernel.source();
  if (!src) return;
  if (index_.emplace(test_store().key_of(*src), sources_.size()).second) sources_.push_back(*src);
}

std::string GeneratedCode::compile(int parallel) {
  const std::vector<codegen::Obtained> got = test_store().obtain(sources_, parallel);
  code_.clear();
  std::string first;
  for (const codegen::Obtained& o : got) {
    code_.push_back(o.kernel);
    if (!o.kernel && first.empty()) first = o.why;
  }
  return first;
}

void GeneratedCode::give(Kernel& kernel) const {
  const auto at = index_.find(test_store().key_of(*kernel.source()));
  if (at != index_.end() && at->second < code_.size()) kernel.set_code(code_[at->second]);
}

}  // namespace wpk::testing
