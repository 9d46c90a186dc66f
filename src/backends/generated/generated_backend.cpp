#include "backends/generated/generated_backend.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>

#include "backends/generated/conv_expr.hpp"
#include "backends/generated/depthwise_pointwise.hpp"
#include "backends/generated/elementwise_chain.hpp"
#include "backends/generated/kernel_support.hpp"
#include "backends/generated/matmul_expr.hpp"
#include "backends/generated/pool_expr.hpp"
#include "backends/generated/row_ops.hpp"
#include "backends/generated/scaled_pointwise.hpp"
#include "graph/fused_ops.hpp"
#include "runtime/measurement.hpp"

namespace wpk::gen {
namespace {

using codegen::CpuTarget;

std::string matmul_recipe(const MatMulSpec& s, const MatMulConfig& c, int lanes, bool pack_b, CpuTarget target) {
  return RecipeText()
      .add("kind", "matmul")
      .add(s)
      .add("op", s.op)
      .add("rank", s.rank)
      .add("k", s.k)
      .add("n", s.n)
      .add("transposed_b", s.transposed_b)
      .add("config", c.text())
      .add("lanes", lanes)
      .add("pack_b", pack_b)
      .add("target", codegen::target_name(target))
      .text();
}

std::string conv_recipe(const ConvSpec& s, const MatMulConfig& c, int lanes, CpuTarget target) {
  RecipeText r;
  r.add("kind", "conv").add(s);
  for (const auto& [key, v] : {std::pair<const char*, std::int64_t>{"h", s.h}, {"w", s.w}, {"c", s.c}, {"o", s.o},
                               {"kh", s.kh}, {"kw", s.kw}, {"sh", s.sh}, {"sw", s.sw}, {"dh", s.dh}, {"dw", s.dw},
                               {"pad_top", s.pad_top}, {"pad_left", s.pad_left}, {"oh", s.oh}, {"ow", s.ow},
                               {"depthwise", s.depthwise}})
    r.add(key, v);
  // Dense weights are read as [o, kh, kw, c] (dense_conv_weights).
  if (!s.depthwise) r.add("weights", "ohwi");
  return r.add("config", c.text()).add("lanes", lanes).add("target", codegen::target_name(target)).text();
}

// How a kernel's first input and its output are shaped: the input ends in `in_tail`, after one
// leading dimension (`rank` set) or any number of them (rank 0), whose product is the kernel's
// dynamic extent; the output is those leading dimensions followed by `out_tail`.
struct Layout {
  Shape in_tail, out_tail;
  std::int64_t rank = 0;
};

// A kernel compiled from generated source: input 0 as Layout says, input 1 the weights (packed
// here when constant, else read as `b_shape`), then the epilogue's bias and residual.
class GeneratedKernel : public CompiledKernel {
 public:
  GeneratedKernel(std::string name, const codegen::Schedule& schedule, CpuTarget target, Layout layout,
                  const Epilogue& epilogue, Shape b_shape, const Tensor* constant_b, std::string recipe)
      : CompiledKernel(std::move(name), schedule, target, std::move(recipe)), layout_(std::move(layout)),
        epilogue_(epilogue), b_shape_(std::move(b_shape)) {
    if (constant_b && !schedule.packs().empty()) packed_b_ = packed_weights(schedule.packs().front(), schedule, *constant_b);
  }

  void run(KernelContext& ctx) const override {
    const Entry code = entry(ctx);
    const Tensor& x = ctx.input(0);
    check_f32(ctx, x, "the input");
    const std::size_t tail = layout_.in_tail.size(), rank = static_cast<std::size_t>(x.rank());
    const bool fits = rank >= tail && (layout_.rank == 0 || rank == static_cast<std::size_t>(layout_.rank)) &&
                      Shape(x.shape().end() - static_cast<std::ptrdiff_t>(tail), x.shape().end()) == layout_.in_tail;
    if (!fits)
      ctx.fail(ErrorCode::InvalidArgument,
               "input " + shape_to_string(x.shape()) + " is not " +
                   (layout_.rank ? "of rank " + std::to_string(layout_.rank) + " ending in " : "a tensor ending in ") +
                   shape_to_string(layout_.in_tail) + ", as the kernel was generated for");
    Shape y_shape(x.shape().begin(), x.shape().end() - static_cast<std::ptrdiff_t>(tail));
    std::int64_t extent = 1;
    for (std::int64_t d : y_shape) extent *= d;
    y_shape.insert(y_shape.end(), layout_.out_tail.begin(), layout_.out_tail.end());
    std::vector<float*> args = {const_cast<float*>(x.data<float>()), const_cast<float*>(weights(ctx))};
    if (epilogue_.bias) {
      const Tensor& bias = ctx.input(2);
      check_f32(ctx, bias, "bias");
      if (bias.numel() != layout_.out_tail.back())
        ctx.fail(ErrorCode::InvalidArgument, "bias " + shape_to_string(bias.shape()) + " does not have the output's " +
                                                 std::to_string(layout_.out_tail.back()) + " columns");
      args.push_back(const_cast<float*>(bias.data<float>()));
    }
    if (epilogue_.residual) {
      const Tensor& z = ctx.input(3);
      check_f32(ctx, z, "residual input");
      if (z.shape() != y_shape)
        ctx.fail(ErrorCode::InvalidArgument,
                 "residual input has shape " + shape_to_string(z.shape()) + ", expected " + shape_to_string(y_shape));
      args.push_back(const_cast<float*>(z.data<float>()));
    }
    Tensor& y = ctx.allocate_output(0, DType::Float32, y_shape);
    if (extent == 0) return;
    args.push_back(y.data<float>());
    code(args.data(), &extent, omp_get_max_threads());
  }

  bool owns_input(std::size_t i) const override { return i == 1 && packed_b_; }

 private:
  // The packed copy of constant weights, else the run's, checked against the generated shape.
  const float* weights(const KernelContext& ctx) const {
    if (packed_b_) return packed_b_->data();
    const Tensor& b = ctx.input(1);
    check_f32(ctx, b, "B");
    if (b.shape() != b_shape_)
      ctx.fail(ErrorCode::InvalidArgument, "input B " + shape_to_string(b.shape()) + " is not the " +
                                               shape_to_string(b_shape_) + " the kernel was generated for");
    return b.data<float>();
  }

  Layout layout_;
  Epilogue epilogue_;
  Shape b_shape_;
  std::shared_ptr<const std::vector<float>> packed_b_;  // panels of the tile's columns
};

// The node as one of this backend's kernels: a product (pointwise convs included) first, else a
// convolution; why neither in `why`.
struct Plan {
  std::optional<MatMulSpec> product;
  std::optional<ConvSpec> conv;
  std::optional<DepthwisePointwiseSpec> group;
  std::optional<ScaledPointwiseSpec> scaled;
  std::optional<ElementwiseChainSpec> chain;
  std::optional<PoolSpec> pool;
  std::optional<RowOpSpec> row;
  explicit operator bool() const { return product || conv || group || scaled || chain || pool || row; }
};

Plan plan_of(const Node& node, const Graph& graph, std::string& why) {
  Plan p;
  if (node.op_type == "DepthwisePointwiseConv") {
    p.group = depthwise_pointwise_spec(node, graph, why);
    return p;
  }
  if (node.op_type == "ScaledPointwiseConv") {
    p.scaled = scaled_pointwise_spec(node, graph, why);
    return p;
  }
  if (node.op_type == "ElementwiseChain") {
    p.chain = elementwise_chain_spec(node, graph, why);
    return p;
  }
  if (node.op_type == "Softmax" || node.op_type == "LayerNormalization") {
    p.row = row_op_spec(node, graph, why);
    return p;
  }
  if (node.op_type == "MaxPool" || node.op_type == "AveragePool" || node.op_type == "GlobalAveragePool") {
    p.pool = pool_spec(node, graph, why);
    return p;
  }
  p.product = matmul_spec(node, graph, why);
  if (p.product) return p;
  std::string conv_why;
  p.conv = conv_spec(node, graph, conv_why);
  if (p.conv) why.clear();
  else if (node.op_type == "Conv" || node.op_type == "FusedConv") why = conv_why;
  return p;
}

// The shapes' dynamic extent (rows of A, or the batch of a conv), or nullopt when A's shape is
// not known.
// How close to its vectors' FMA peak a register tile of `rows` pixels (or product rows) by
// `vectors` vectors of output channels runs, relative to a 14 x 2 tile. Each step of the
// reduction does rows x vectors FMAs (two a cycle) and also loads `vectors` weight vectors, again
// for every tile of rows (from L2 once the weights outgrow L1: about a cycle a vector), and
// broadcasts `rows` inputs from L1 (mostly hidden behind the FMAs): so tall tiles amortise the
// weights, and wide ones the inputs. A row of `extent` is cut into equal tiles: a tile taller
// than the row covers only the row.
double tile_efficiency(int rows, int vectors, std::int64_t extent) {
  constexpr double kFmasPerCycle = 2, kWeightVectorCycles = 1, kBroadcastCycles = 0.15;
  const auto cost = [&](double r, double v) {
    return 1 + kFmasPerCycle * kWeightVectorCycles / r + kFmasPerCycle * kBroadcastCycles / v;
  };
  extent = std::max<std::int64_t>(extent, 1);
  const std::int64_t tiles = (extent + rows - 1) / std::max(rows, 1);
  const double r = std::min<double>(rows, static_cast<double>(extent) / static_cast<double>(tiles));
  return cost(14, 2) / cost(r, std::max(vectors, 1));
}

std::optional<std::int64_t> dynamic_extent(const InputShapes& shapes, std::size_t tail) {
  if (shapes.empty() || !shapes[0] || shapes[0]->size() < tail) return std::nullopt;
  std::int64_t rows = 1;
  for (std::size_t d = 0; d + tail < shapes[0]->size(); ++d) rows *= (*shapes[0])[d];
  return rows;
}

}  // namespace

std::string GeneratedBackend::why_unsupported(const Node& node, const Graph& graph) const {
  std::string why;
  plan_of(node, graph, why);
  return why;
}

bool GeneratedBackend::accumulates_into_residual(const Node& node, const std::string& config) const {
  if (fused_residual_input(node) < 0) return false;
  const std::optional<MatMulConfig> c = MatMulConfig::parse(config);
  return !c || c->k_block == 0;
}

std::vector<std::string> GeneratedBackend::configs(const Node& node, const Graph& graph) const {
  std::string why;
  const Plan plan = plan_of(node, graph, why);
  if (!plan) return {""};
  if (plan.chain) return elementwise_chain_configs();
  if (plan.row) return row_op_configs();
  std::vector<std::string> out;
  if (plan.pool) {
    const CpuTarget target = widest_target();
    for (const MatMulConfig& c : pool_configs(*plan.pool, vector_registers(target), codegen::vector_lanes(target)))
      out.push_back(c.text());
    return out;
  }
  if (plan.group || plan.scaled) {
    for (const GroupConfig& c : plan.group ? group_configs(plan.group->depthwise.ow, plan.group->depthwise.c, widest_target())
                                           : group_configs(plan.scaled->w, plan.scaled->c, widest_target()))
      out.push_back(c.text());
    return out.empty() ? std::vector<std::string>{""} : out;
  }
  for (const MatMulConfig& c : matmul_configs(vector_registers(widest_target())))
    // A conv's tile spans at least 4 output pixels: fewer reload each weight vector too often to
    // be worth compiling.
    if (plan.product || c.rows >= 4) out.push_back(c.text());
  // A product or a conv (not depthwise) with constant (packed) weights: each tile also
  // prefetching them, after the others (the first config is the default one).
  if (graph.initializer(node.inputs[1]) && (plan.product || (plan.conv && !plan.conv->depthwise)))
    for (MatMulConfig c : matmul_configs(vector_registers(widest_target())))
      if (plan.product || c.rows >= 4) {
        c.prefetch = true;
        out.push_back(c.text());
      }
  // A product or a conv with a fused residual: each tile over row tiles also asking for the
  // residual it adds as it starts (a thread's rows of the residual then arrive in order).
  if ((plan.product && plan.product->residual) || (plan.conv && plan.conv->residual))
    for (MatMulConfig c : matmul_configs(vector_registers(widest_target())))
      if (!c.parallel_cols && (plan.product || c.rows >= 4)) {
        c.prefetch_residual = true;
        out.push_back(c.text());
      }
  // A product with constant B in blocks of K: over column tiles, for the tiles of at least 8
  // vectors (a smaller one reloads the partial sums too often for the blocks to pay).
  if (plan.product && graph.initializer(node.inputs[1]))
    for (int block : k_blocks(plan.product->k))
      for (MatMulConfig c : matmul_configs(vector_registers(widest_target())))
        if (c.parallel_cols && c.rows * c.vectors >= 8) {
          c.k_block = block;
          out.push_back(c.text());
        }
  return out;
}

std::unique_ptr<Kernel> GeneratedBackend::prepare(const Node& node, const Graph& graph) const {
  return prepare(node, graph, configs(node, graph).front());
}

std::unique_ptr<Kernel> GeneratedBackend::prepare(const Node& node, const Graph& graph, const std::string& config) const {
  std::string why;
  const Plan plan = plan_of(node, graph, why);
  if (!plan) throw Error(ErrorCode::Unsupported, node_label(node) + why);
  if (plan.chain) {
    try {
      return make_elementwise_chain(*plan.chain, config.empty() ? elementwise_chain_configs().front() : config);
    } catch (const std::invalid_argument& e) {
      throw Error(ErrorCode::Unsupported, node_label(node) + "no generated kernel in configuration '" + config + "': " + e.what());
    }
  }
  if (plan.row) {
    try {
      return make_row_op(*plan.row, config.empty() ? row_op_configs().front() : config);
    } catch (const std::invalid_argument& e) {
      throw Error(ErrorCode::Unsupported, node_label(node) + "no generated kernel in configuration '" + config + "': " + e.what());
    }
  }
  if (plan.group || plan.scaled) {
    const std::optional<GroupConfig> g = GroupConfig::parse(config.empty() ? configs(node, graph).front() : config);
    if (!g) throw Error(ErrorCode::Internal, node_label(node) + "the gen backend has no configuration '" + config + "'");
    try {
      if (plan.scaled) return make_scaled_pointwise(node, graph, *plan.scaled, *g);
      return make_depthwise_pointwise(node, graph, *plan.group, *g);
    } catch (const std::invalid_argument& e) {
      throw Error(ErrorCode::Unsupported, node_label(node) + "no generated kernel in configuration '" + config + "': " + e.what());
    }
  }
  const std::optional<MatMulConfig> c = MatMulConfig::parse(config.empty() ? configs(node, graph).front() : config);
  if (!c) throw Error(ErrorCode::Internal, node_label(node) + "the gen backend has no configuration '" + config + "'");
  if (c->k_block && !plan.product)
    throw Error(ErrorCode::Unsupported, node_label(node) + "only generated products run in blocks of K ('" + config + "')");
  if (c->prefetch_residual && plan.pool)
    throw Error(ErrorCode::Unsupported, node_label(node) + "a pool has no residual to prefetch ('" + config + "')");
  if (plan.pool) {
    try {
      return make_pool(*plan.pool, *c);
    } catch (const std::invalid_argument& e) {
      throw Error(ErrorCode::Unsupported, node_label(node) + "no generated kernel in configuration '" + config + "': " + e.what());
    }
  }
  const CpuTarget target = widest_target();
  const int lanes = codegen::vector_lanes(target);
  const Tensor* w = graph.initializer(node.inputs[1]);
  if (w && w->dtype() != DType::Float32) w = nullptr;
  try {
    if (plan.product) {
      const MatMulSpec& s = *plan.product;
      const Shape b_shape = s.transposed_b ? Shape{s.n, s.k} : Shape{s.k, s.n};
      return std::make_unique<GeneratedKernel>(kernel_name(s.op, *c, target),
                                               matmul_schedule(matmul_compute(s), *c, lanes, w != nullptr), target,
                                               Layout{{s.k}, {s.n}, s.rank}, s, b_shape, w,
                                               matmul_recipe(s, *c, lanes, w != nullptr, target));
    }
    const ConvSpec& s = *plan.conv;
    const Tensor dense_w = !s.depthwise && w ? dense_conv_weights(*w) : Tensor();
    if (!dense_w.empty()) w = &dense_w;
    return std::make_unique<GeneratedKernel>(kernel_name(s.depthwise ? "depthwise_conv_nhwc" : "conv_nhwc", *c, target),
                                             conv_schedule(conv_compute(s), *c, lanes), target,
                                             Layout{{s.h, s.w, s.c}, {s.oh, s.ow, s.o}, 4}, s, Shape{}, w,
                                             conv_recipe(s, *c, lanes, target));
  } catch (const std::invalid_argument& e) {
    throw Error(ErrorCode::Unsupported, node_label(node) + "no generated kernel in configuration '" + config + "': " + e.what());
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::ResourceExhausted, node_label(node) + "out of memory packing the weights of a generated kernel");
  }
}

std::optional<KernelProfile> GeneratedBackend::describe(const Node& node, const Graph& graph, const std::string& config,
                                                        const InputShapes& shapes, int threads) const {
  std::string why;
  const Plan plan = plan_of(node, graph, why);
  if (plan.chain) {
    // One pass over the data, the steps' results in registers: memory-bound where the steps are
    // cheap (the workload's bytes are the inputs and the output), a vector op a step otherwise.
    const std::vector<std::string> known = elementwise_chain_configs();
    if (std::find(known.begin(), known.end(), config) == known.end()) return std::nullopt;
    KernelProfile p;
    p.name = elementwise_chain_kernel_name(config, widest_target());
    p.vector_bits = 32 * codegen::vector_lanes(widest_target());
    p.efficiency = 0.5;
    p.extra_bytes = 0;
    return p;
  }
  if (plan.row) {
    // Passes over a row that stays in cache: memory-bound on long rows, a few vector ops an
    // element otherwise; a share below the hand-written layer norm's until measured.
    const std::vector<std::string> known = row_op_configs();
    if (std::find(known.begin(), known.end(), config) == known.end()) return std::nullopt;
    KernelProfile p;
    p.name = row_op_kernel_name(*plan.row, config, widest_target());
    p.vector_bits = 32 * codegen::vector_lanes(widest_target());
    p.efficiency = 0.45;
    p.extra_bytes = 0;
    return p;
  }
  const std::optional<GroupConfig> group_config = plan.group || plan.scaled ? GroupConfig::parse(config) : std::nullopt;
  const std::optional<MatMulConfig> c = group_config ? group_config->tile() : MatMulConfig::parse(config);
  if (!plan || !c || (c->k_block && !plan.product)) return std::nullopt;
  const CpuTarget target = widest_target();
  const int lanes = codegen::vector_lanes(target);
  threads = std::max(1, threads);
  KernelProfile p;
  p.vector_bits = 32 * lanes;
  // The tile's share (tile_efficiency) of a base below the hand-written and library kernels'
  // until measurement says otherwise; weights read strided (not constant, transposed) pay, and so
  // does a depthwise tile, which loads every input it multiplies.
  const double fmas = c->rows * c->vectors;
  std::int64_t columns = 0, tiles = 0;
  if (plan.group) {
    if (!dynamic_extent(shapes, 3)) return std::nullopt;
    p.name = group_kernel_name("depthwise_pointwise_nhwc", *group_config, target);
    // The pointwise product's tile, as a conv's; the depthwise output costs no memory traffic.
    p.efficiency = 0.36 * tile_efficiency(c->rows, c->vectors, plan.group->depthwise.ow);
    p.extra_bytes = 0;
    columns = plan.group->o;
    tiles = plan.group->depthwise.oh;
  } else if (plan.scaled) {
    if (!dynamic_extent(shapes, 3)) return std::nullopt;
    p.name = group_kernel_name("scaled_pointwise_nhwc", *group_config, target);
    // The pointwise product's tile, as a conv's; the scaled input costs no memory traffic.
    p.efficiency = 0.36 * tile_efficiency(c->rows, c->vectors, plan.scaled->w);
    p.extra_bytes = 0;
    columns = plan.scaled->o;
    tiles = plan.scaled->h;
  } else if (plan.pool) {
    if (!dynamic_extent(shapes, 3)) return std::nullopt;
    p.name = kernel_name(plan.pool->op, *c, target);
    // A load and a max (or add) a tap for each vector of the tile: bound by loads and by the
    // memory the window reads, as the hand-written pool is, a share below it until measured.
    p.efficiency = 0.45;
    columns = plan.pool->c;
    tiles = c->parallel_cols ? (plan.pool->c + c->vectors * lanes - 1) / (c->vectors * lanes) : plan.pool->oh;
    // Split over channel tiles, every thread walks the whole image reading a slice of each
    // pixel's channels: each core's caches fetch whole lines (and their prefetched neighbours)
    // of the input, about the whole input per thread.
    if (c->parallel_cols && shapes[0])
      p.extra_bytes = static_cast<double>(std::min<std::int64_t>(threads, tiles) - 1) *
                      static_cast<double>(shape_numel(*shapes[0])) * sizeof(float);
  } else if (plan.product) {
    const MatMulSpec& s = *plan.product;
    const std::optional<std::int64_t> rows = dynamic_extent(shapes, 1);
    if (!rows) return std::nullopt;
    p.name = kernel_name(s.op, *c, target);
    const bool packed = graph.initializer(node.inputs[1]) != nullptr;
    p.efficiency = 0.4 * tile_efficiency(c->rows, c->vectors, *rows) * (s.transposed_b && !packed ? 0.25 : 1.0);
    columns = s.n;
    const std::int64_t col_tiles = (s.n + c->vectors * lanes - 1) / (c->vectors * lanes);
    const std::int64_t row_tiles = (std::max<std::int64_t>(*rows, 1) + c->rows - 1) / c->rows;
    tiles = c->parallel_cols ? col_tiles : row_tiles;
    // Each row tile walks every panel of B, each panel every row tile of A: where the one read
    // again does not fit a core's private cache, every pass after the first comes from memory
    // (B of BERT's feed-forward products, 9 MB, read once per row tile split over rows).
    // In blocks of K, the rows of one block are read again (each pass over the column tiles
    // reads a block of A), and the partial sums go out to the output and back between blocks.
    const std::int64_t k_read = c->k_block ? std::min<std::int64_t>(c->k_block, s.k) : s.k;
    const double again_bytes = sizeof(float) * static_cast<double>(c->parallel_cols ? *rows * k_read : s.k * s.n);
    const std::int64_t passes = c->parallel_cols ? col_tiles : row_tiles;
    const std::int64_t blocks = (s.k + k_read - 1) / k_read;
    if (again_bytes > static_cast<double>(private_cache_bytes()) && passes > 1)
      p.extra_bytes += static_cast<double>(passes - 1) * again_bytes * static_cast<double>(blocks);
    p.extra_bytes += 2.0 * sizeof(float) * static_cast<double>(blocks - 1) * static_cast<double>(*rows * s.n);
    p.parallel_regions = static_cast<int>(blocks);
    if (c->prefetch) p.prefetched_bytes = sizeof(float) * static_cast<double>(s.k * s.n) + p.extra_bytes;
    if (c->prefetch_residual) p.prefetched_bytes += sizeof(float) * static_cast<double>(*rows * s.n);
  } else {
    const ConvSpec& s = *plan.conv;
    if (!dynamic_extent(shapes, 3)) return std::nullopt;
    p.name = kernel_name(s.depthwise ? "depthwise_conv_nhwc" : "conv_nhwc", *c, target);
    p.efficiency = s.depthwise ? 0.3 * fmas / (fmas + c->vectors) : 0.36 * tile_efficiency(c->rows, c->vectors, s.ow);
    if (c->prefetch) p.prefetched_bytes = sizeof(float) * static_cast<double>(s.kh * s.kw * s.c * s.o);
    if (c->prefetch_residual && shapes[0] && !shapes[0]->empty())
      p.prefetched_bytes += sizeof(float) * static_cast<double>((*shapes[0])[0] * s.oh * s.ow * s.o);
    columns = s.o;
    tiles = c->parallel_cols ? (s.o + c->vectors * lanes - 1) / (c->vectors * lanes) : s.oh;
  }
  // A prefetch a reduction step beside the tile's multiply-adds takes issue slots; what it saves,
  // the weights' transfer hidden behind the arithmetic, is prefetched_bytes. A residual's
  // prefetches (a line or two per tile row, once per reduction) take too few slots to count.
  if (c->prefetch) p.efficiency *= static_cast<double>(c->rows * c->vectors) / (c->rows * c->vectors + 1);
  // Masked last vectors do whole vectors' work; the parallel loop's tiles shared among threads.
  const std::int64_t cols = std::min<std::int64_t>(std::int64_t{c->vectors} * lanes, columns);
  const std::int64_t per_thread = (tiles + threads - 1) / threads;
  p.work_scale = static_cast<double>((columns + cols - 1) / cols * cols) / static_cast<double>(columns) *
                 static_cast<double>(per_thread * threads) / static_cast<double>(std::max<std::int64_t>(tiles, 1));
  return p;
}

}  // namespace wpk::gen
