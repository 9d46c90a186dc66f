#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "backends/cuda/cuda_backend.hpp"
#include "backends/cuda/device_op.hpp"
#include "backends/cuda/generated_kernels.hpp"
#include "backends/cuda/support.hpp"
#include "graph/fused_ops.hpp"
#include "runtime/logging.hpp"
#include "runtime/memory_planner.hpp"
#include "runtime/run_control.hpp"

namespace wpk::cuda {
namespace {

CUdeviceptr device_address(const Tensor& t) { return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(t.raw())); }

// Where a value lives: a constant's own buffer, or a place in a run context's arena (the memory
// plan's request), under its own shape (views share their input's place).
struct Slot {
  int request = -1;              // in the arena's layout
  ValueId constant = kNoValue;   // else this constant's buffer
  Shape shape;
};

class RegionKernel : public Kernel {
 public:
  RegionKernel(const Node& node, const Graph& body) : name_(node.name), cubins_(node.attr_string("kernel_cache", "")) {
    Device::get();
    const std::vector<std::size_t> roots = elementwise_group_roots(body);
    const std::vector<DepthFirstNodes> depth_first = depth_first_groups(body);
    plan_memory(body, roots, depth_first);
    // The first run context: its stream and arena serve to prepare the ops (cuDNN measures its
    // algorithms on them) and then the first run.
    contexts_.push_back(std::make_unique<Context>(*this));
    Context& first = *contexts_.front();
    for (const auto& [v, t] : body.initializers()) {
      if (t.dtype() != DType::Float32) continue;  // shapes and axes of view ops stay on the host
      constants_.emplace_back(t.nbytes(), "constant '" + body.value(v).name + "' of region " + name_);
      constant_at_[v] = constants_.back().get();
      check(driver().MemcpyHtoDAsync(constants_.back().get(), t.raw(), t.nbytes(), first.handles.stream()), "uploading a constant");
    }
    first.handles.synchronize("uploading constants");
    // Tuning asked for at placement (attributes tune_algorithm, tune_seed, tune_trials).
    std::optional<SearchSettings> search;
    if (node.has_attr("tune_algorithm")) {
      search = SearchSettings{};
      search->algorithm = node.attr_string("tune_algorithm", "ga");
      search->seed = static_cast<std::uint64_t>(node.attr_int("tune_seed", 0));
      search->trials = static_cast<std::size_t>(std::max<std::int64_t>(1, node.attr_int("tune_trials", 16)));
    }
    if (const Attribute* a = node.find_attr("disabled_variants"))
      disabled_.insert(a->strings().begin(), a->strings().end());
    std::map<std::string, std::string> choices;
    for (std::size_t i = 0; i < body.nodes().size(); ++i) {
      const Node& n = body.nodes()[i];
      if (is_view_op(n) || roots[i] != i) continue;  // a member of a group runs in its root's kernel
      const bool grouped = std::count(roots.begin(), roots.end(), i) > 1;
      std::optional<ElementwiseGroup> group;
      if (grouped) group = elementwise_group_kernel(body, roots, i);
      Step step;
      step.node = i;
      step.in = grouped ? group->inputs : n.inputs;
      step.out = n.outputs[0];
      const std::vector<DeviceTensor> in = first.tensors(*this, step.in);
      const PrepareEnv env{n,       body,      in, first.tensor(*this, step.out), first.handles, search ? &*search : nullptr,
                           &choices, &cubins_, current_tuning_records(), &disabled_};
      step.op = grouped ? prepare_elementwise_group(env, *group) : prepare_device_op(env);
      scratch_bytes_ = std::max(scratch_bytes_, step.op->scratch_bytes());
      workspace_bytes_ = std::max(workspace_bytes_, step.op->workspace_bytes());
      zeros_bytes_ = std::max(zeros_bytes_, step.op->zeros_bytes());
      steps_.push_back(std::move(step));
    }
    form_depth_first_groups(body, depth_first, search ? &*search : nullptr, &choices, first);
    for (std::int64_t o : node.attr_ints("returned_outputs")) returned_.insert(static_cast<std::size_t>(o));
    for (ValueId v : body.inputs()) inputs_.push_back(v);
    for (ValueId v : body.outputs()) outputs_.push_back(v);
    zeros_ = DeviceBuffer(zeros_bytes_, "zeros of region " + name_);
    if (zeros_bytes_)
      check(driver().MemsetD32Async(zeros_.get(), 0, zeros_bytes_ / sizeof(float), first.handles.stream()), "zeroing");
    first.finish(*this);
    graphed_ = first.graph != nullptr;
    for (const Step& s : steps_) kernels_ += (kernels_.empty() ? "" : ", ") + s.op->describe();
    if (logger().should_log(spdlog::level::debug)) log_step_times(body, first);
  }

  void run(KernelContext& ctx) const override {
    Context& c = acquire();
    struct Release {
      const RegionKernel* k;
      Context* c;
      ~Release() { k->release(c); }
    } release{this, &c};
    Device::get().activate();
    const CUstream stream = c.handles.stream();
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      const Tensor& t = ctx.input(i);
      const DeviceTensor d = c.tensor(*this, inputs_[i]);
      if (t.shape() != d.shape || t.dtype() != DType::Float32)
        ctx.fail(ErrorCode::InvalidArgument, "input " + std::to_string(i) + " of the device region is " + dtype_name(t.dtype()) +
                                                 shape_to_string(t.shape()) + ", prepared for float32" + shape_to_string(d.shape));
      if (t.on_device())
        check(driver().MemcpyDtoDAsync(d.ptr, device_address(t), t.nbytes(), stream), "copying a device input into the region");
      else
        check(driver().MemcpyHtoDAsync(d.ptr, t.raw(), t.nbytes(), stream), "copying an input to the device");
    }
    if (c.graph) c.graph->launch(stream);
    else c.launch_steps(*this);
    const RunOptions* options = current_run_options();
    const bool on_device = options && options->outputs_on_device;
    for (std::size_t o = 0; o < outputs_.size(); ++o) {
      if (!ctx.wants_output(o)) continue;
      const DeviceTensor d = c.tensor(*this, outputs_[o]);
      if (on_device && returned_.count(o)) {
        Tensor y = device_tensor(DType::Float32, d.shape, "output " + std::to_string(o) + " of region " + name_);
        check(driver().MemcpyDtoDAsync(device_address(y), d.ptr, y.nbytes(), stream), "copying an output on the device");
        ctx.set_output(o, std::move(y));
        continue;
      }
      Tensor& y = ctx.allocate_output(o, DType::Float32, d.shape);
      check(driver().MemcpyDtoHAsync(y.raw(), d.ptr, y.nbytes(), stream), "copying an output from the device");
    }
    c.handles.synchronize("running device region " + name_);
  }

  KernelProfile profile() const override {
    KernelProfile p;
    p.name = std::string(graphed_ ? "graph" : "region") + "[" + kernels_ + "]";
    return p;
  }

 private:
  struct Step {
    std::size_t node = 0;     // in the body
    std::vector<ValueId> in;  // kNoValue for an omitted input
    ValueId out = kNoValue;
    std::unique_ptr<DeviceOp> op;
  };

  // What one run in flight holds: a stream with its library handles, an arena for the region's
  // inputs and intermediates laid out by the memory plan, scratch and workspace, and the steps
  // captured as a CUDA graph over these pointers. Overlapping runs each take one; a run that finds
  // none free makes another (up to kMaxContexts, then it waits).
  struct Context {
    explicit Context(const RegionKernel& k)
        : arena(k.layout_.arena_bytes, "the arena of region " + k.name_) {}
    // After the ops are prepared: the buffers they asked for, and the captured graph.
    void finish(const RegionKernel& k) {
      scratch = DeviceBuffer(k.scratch_bytes_, "scratch of region " + k.name_);
      workspace = DeviceBuffer(k.workspace_bytes_, "cuDNN workspace of region " + k.name_);
      try {
        graph = std::make_unique<CapturedWork>(handles, [this, &k] { launch_steps(k); });
      } catch (const Error& e) {
        logger().info("device region {}: launched step by step, as it could not be captured ({})", k.name_, e.what());
      }
    }
    DeviceTensor tensor(const RegionKernel& k, ValueId v) const {
      if (v == kNoValue) return {};
      const Slot& s = k.slots_.at(v);
      if (s.request < 0) return {k.constant_at_.at(s.constant), s.shape};
      return {arena.get() + k.layout_.offsets[static_cast<std::size_t>(s.request)], s.shape};
    }
    std::vector<DeviceTensor> tensors(const RegionKernel& k, const std::vector<ValueId>& values) const {
      std::vector<DeviceTensor> t;
      for (ValueId v : values) t.push_back(tensor(k, v));
      return t;
    }
    void launch_steps(const RegionKernel& k) const {
      const LaunchEnv env{handles, scratch.get(), workspace.get(), k.zeros_.get()};
      for (const Step& s : k.steps_) {
        s.op->launch(env, tensors(k, s.in), tensor(k, s.out));
      }
    }
    StreamHandles handles;
    DeviceBuffer arena, scratch, workspace;
    std::unique_ptr<CapturedWork> graph;
  };

  // One place per region input and per value an op writes, by lifetime (step 0 copies the inputs
  // in, step i + 1 runs op i, the last step copies the outputs out): values alive at once never
  // overlap. A view lives in its input's place and keeps it alive.
  // An element-wise group's members run in its root's kernel (elementwise_group_roots): what they
  // read lives until the root's step, and the values they make inside it take no place. A
  // depth-first group's pointwise step may read the depthwise op's inputs, which live until then.
  void plan_memory(const Graph& body, const std::vector<std::size_t>& roots, const std::vector<DepthFirstNodes>& depth_first) {
    std::vector<BufferRequest> requests;
    auto place = [&](ValueId v, int step) {
      const Shape shape = static_shape(body, v);
      requests.push_back({static_cast<std::size_t>(shape_numel(shape)) * sizeof(float), step, step, -1});
      slots_[v] = {static_cast<int>(requests.size()) - 1, kNoValue, shape};
    };
    for (const auto& [v, t] : body.initializers())
      if (t.dtype() == DType::Float32) slots_[v] = {-1, v, t.shape()};
    auto keep_alive = [&](ValueId v, int step) {
      const auto it = slots_.find(v);
      if (it != slots_.end() && it->second.request >= 0) {
        BufferRequest& r = requests[static_cast<std::size_t>(it->second.request)];
        r.last_step = std::max(r.last_step, step);
      }
    };
    for (ValueId v : body.inputs()) place(v, 0);
    int step = 0;
    for (std::size_t i = 0; i < body.nodes().size(); ++i) {
      const Node& n = body.nodes()[i];
      ++step;
      for (ValueId v : n.inputs) keep_alive(v, static_cast<int>(roots[i]) + 1);
      for (const DepthFirstNodes& d : depth_first)
        if (d.pointwise == i)
          for (ValueId v : depth_first_inputs(body.nodes()[d.depthwise], n)) keep_alive(v, step);
      if (is_view_op(n)) {
        const auto in = slots_.find(n.inputs[0]);
        if (in != slots_.end()) slots_[n.outputs[0]] = {in->second.request, in->second.constant, static_shape(body, n.outputs[0])};
        continue;
      }
      if (roots[i] == i) place(n.outputs[0], step);
    }
    for (ValueId v : body.outputs()) keep_alive(v, step + 1);
    layout_ = assign_offsets(requests);
  }

  // Where a run's device time goes: each step timed alone on the first context's buffers.
  void log_step_times(const Graph& body, const Context& first) const {
    const LaunchEnv env{first.handles, first.scratch.get(), first.workspace.get(), zeros_.get()};
    double total = 0;
    for (const Step& s : steps_) {
      const std::vector<DeviceTensor> in = first.tensors(*this, s.in);
      const DeviceTensor out = first.tensor(*this, s.out);
      double seconds = 0;
      try {
        seconds = median_launch_seconds(first.handles, [&] { s.op->launch(env, in, out); });
      } catch (const Error& e) {
        logger().debug("device region {}: {} not timed: {}", name_, body.nodes()[s.node].name, e.what());
        continue;
      }
      total += seconds;
      logger().debug("device region {}: {} {:.1f} us {} {}", name_, body.nodes()[s.node].op_type, seconds * 1e6,
                     body.nodes()[s.node].name, s.op->describe());
    }
    logger().debug("device region {}: {} steps, {:.1f} us timed one by one", name_, steps_.size(), total * 1e6);
  }

  // Each depth-first group whose generated kernel tuning chooses now, or chose before, over its
  // two prepared ops: the pointwise step runs it, the depthwise step goes.
  void form_depth_first_groups(const Graph& body, const std::vector<DepthFirstNodes>& groups, const SearchSettings* search,
                               std::map<std::string, std::string>* choices, Context& first) {
    std::set<std::size_t> dropped;
    for (const DepthFirstNodes& g : groups) {
      const auto step_of = [&](std::size_t node) {
        return std::find_if(steps_.begin(), steps_.end(), [&](const Step& s) { return s.node == node; });
      };
      const auto dw = step_of(g.depthwise), pw = step_of(g.pointwise);
      if (dw == steps_.end() || pw == steps_.end()) continue;
      const Node& depthwise = body.nodes()[g.depthwise];
      const std::vector<ValueId> in = depth_first_inputs(depthwise, body.nodes()[g.pointwise]);
      const SeparateOps separate{*dw->op, first.tensors(*this, dw->in), first.tensor(*this, dw->out),
                                 *pw->op, first.tensors(*this, pw->in), first.tensor(*this, pw->out)};
      const PrepareEnv env{body.nodes()[g.pointwise], body, first.tensors(*this, in), first.tensor(*this, pw->out), first.handles, search,
                           choices, &cubins_, current_tuning_records(), &disabled_};
      std::unique_ptr<DeviceOp> op = prepare_depth_first(env, depthwise, separate);
      if (!op) continue;
      pw->op = std::move(op);
      pw->in = in;
      dropped.insert(g.depthwise);
    }
    steps_.erase(std::remove_if(steps_.begin(), steps_.end(), [&](const Step& s) { return dropped.count(s.node) > 0; }), steps_.end());
  }

  Context& acquire() const {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      for (auto& c : contexts_)
        if (!busy_.count(c.get())) {
          busy_.insert(c.get());
          return *c;
        }
      if (contexts_.size() + making_ < kMaxContexts) break;
      freed_.wait(lock);
    }
    // A new context for this overlapping run, made outside the lock (it captures a graph).
    ++making_;
    lock.unlock();
    std::unique_ptr<Context> made;
    try {
      Device::get();
      made = std::make_unique<Context>(*this);
      made->finish(*this);
    } catch (...) {
      lock.lock();
      --making_;
      freed_.notify_one();
      throw;
    }
    lock.lock();
    --making_;
    Context& c = *made;
    busy_.insert(&c);
    contexts_.push_back(std::move(made));
    return c;
  }

  void release(Context* c) const {
    std::lock_guard<std::mutex> lock(mu_);
    busy_.erase(c);
    freed_.notify_one();
  }

  static constexpr std::size_t kMaxContexts = 4;
  std::string name_;
  codegen::CubinStore cubins_;
  std::map<ValueId, Slot> slots_;
  std::map<ValueId, CUdeviceptr> constant_at_;
  MemoryLayout layout_;
  std::vector<DeviceBuffer> constants_;
  std::vector<ValueId> inputs_, outputs_;
  std::set<std::size_t> returned_;  // outputs only the caller reads (RunOptions::outputs_on_device)
  // Declared before the steps, so destroyed after them, also when the constructor throws: cuDNN's
  // execution plans (in the ops) keep the first context's handle.
  mutable std::vector<std::unique_ptr<Context>> contexts_;
  std::vector<Step> steps_;
  std::set<std::string> disabled_;  // library variants left out (PrepareEnv::disabled)
  std::size_t scratch_bytes_ = 0, workspace_bytes_ = 0, zeros_bytes_ = 0;
  DeviceBuffer zeros_;
  std::string kernels_;
  bool graphed_ = false;
  mutable std::size_t making_ = 0;
  mutable std::set<Context*> busy_;
  mutable std::mutex mu_;
  mutable std::condition_variable freed_;
};

}  // namespace

std::string CudaBackend::why_unsupported(const Node& node, const Graph&) const {
  if (node.domain != kWpkDomain || node.op_type != kRegionOp) return "the cuda backend runs device regions only";
  const Attribute* body = node.find_attr("body");
  if (!body || body->kind() != Attribute::Kind::Graph) return "a device region without its body";
  return "";
}

std::unique_ptr<Kernel> CudaBackend::prepare(const Node& node, const Graph& graph) const {
  if (std::string why = why_unsupported(node, graph); !why.empty()) throw Error(ErrorCode::Unsupported, node_label(node) + why);
  return std::make_unique<RegionKernel>(node, node.find_attr("body")->g());
}

std::string CudaBackend::version() const {
  std::string v = "cuda";
  if (why_no_cuda_device().empty()) v += "-driver" + std::to_string(Device::get().info().driver_version);
  return v;
}

}  // namespace wpk::cuda
