#include "backends/generated/matmul_expr.hpp"

#include <algorithm>
#include <cstdio>

#include "backends/generated/epilogue.hpp"
#include "graph/fused_ops.hpp"

namespace wpk::gen {
namespace {

using namespace codegen;

bool all_equal(const std::vector<std::int64_t>& values, std::int64_t v) {
  return std::all_of(values.begin(), values.end(), [v](std::int64_t x) { return x == v; });
}

std::optional<MatMulSpec> pointwise_conv_spec(const Node& node, const Graph& graph, std::string& why) {
  if (node.attr_int("channels_last", 0) != 1) {
    why = "generated convs read NHWC (channels_last) activations only";
    return std::nullopt;
  }
  const Tensor* w = node.inputs.size() > 1 && node.inputs[1] != kNoValue ? graph.initializer(node.inputs[1]) : nullptr;
  if (!w || w->dtype() != DType::Float32 || w->rank() != 4 || w->shape()[2] != 1 || w->shape()[3] != 1 || w->numel() == 0 ||
      node.attr_int("group", 1) != 1 || !all_equal(node.attr_ints("strides", {1, 1}), 1) ||
      !all_equal(node.attr_ints("pads", {0, 0, 0, 0}), 0)) {
    why = "generated convs are pointwise: constant float32 1x1 weights, stride 1, no padding, one group";
    return std::nullopt;
  }
  MatMulSpec spec;
  spec.op = "conv1x1_nhwc";
  spec.rank = 4;
  spec.n = w->shape()[0];
  spec.k = w->shape()[1];
  spec.transposed_b = true;  // [C_out, C_in] is B transposed
  const ValueInfo& x = graph.value(node.inputs[0]);
  if (!is_float32(graph, node.inputs[0]) ||
      (x.dims && (x.dims->size() != 4 || (x.dims->back().is_static() && x.dims->back().value != spec.k)))) {
    why = "the input is not float32 NHWC with the weights' channels";
    return std::nullopt;
  }
  if (!read_conv_epilogue(node, graph, spec.n, spec, why)) return std::nullopt;
  return spec;
}

}  // namespace

std::optional<MatMulSpec> matmul_spec(const Node& node, const Graph& graph, std::string& why) {
  const bool onnx = node.domain.empty() || node.domain == "ai.onnx";
  if ((onnx && node.op_type == "Conv") || (node.domain == kWpkDomain && node.op_type == "FusedConv"))
    return pointwise_conv_spec(node, graph, why);
  const bool fused = node.domain == kWpkDomain && node.op_type == "FusedMatMul";
  const bool gemm = onnx && node.op_type == "Gemm";
  if (!fused && !gemm && !(onnx && node.op_type == "MatMul")) {
    why = "the gen backend does not write " + node.op_type;
    return std::nullopt;
  }
  if (node.inputs.size() < 2 || node.inputs[1] == kNoValue) {
    why = "no B";
    return std::nullopt;
  }
  for (ValueId v : node.inputs)
    if (v != kNoValue && !is_float32(graph, v)) {
      why = "generated products take float32 inputs";
      return std::nullopt;
    }
  MatMulSpec spec;
  if (gemm) {
    if (node.attr_int("transA", 0) != 0 || node.attr_float("alpha", 1.f) != 1.f || node.attr_float("beta", 1.f) != 1.f) {
      why = "Gemm with transA or alpha/beta other than 1";
      return std::nullopt;
    }
    spec.transposed_b = node.attr_int("transB", 0) == 1;
  }
  const auto b = static_dims(graph, node.inputs[1]);
  if (!b || b->size() != 2 || (*b)[0] < 1 || (*b)[1] < 1) {
    why = "generated products need a 2-D B of known, non-empty shape";
    return std::nullopt;
  }
  spec.k = spec.transposed_b ? (*b)[1] : (*b)[0];
  spec.n = spec.transposed_b ? (*b)[0] : (*b)[1];
  const ValueInfo& a = graph.value(node.inputs[0]);
  if (a.dims && (a.dims->empty() || (a.dims->back().is_static() && a.dims->back().value != spec.k))) {
    why = "A's last dimension does not match B";
    return std::nullopt;
  }
  if (!(onnx && node.op_type == "MatMul") && node.inputs.size() > 2 && node.inputs[2] != kNoValue) {
    const auto bias = static_dims(graph, node.inputs[2]);
    const bool row = bias && ((bias->size() == 1 && (*bias)[0] == spec.n) ||
                              (bias->size() == 2 && (*bias)[0] == 1 && (*bias)[1] == spec.n));
    if (!row) {
      why = "generated products take a bias of shape [N] or [1, N]";
      return std::nullopt;
    }
    spec.bias = true;
  }
  spec.residual = has_fused_residual(node);
  if (fused && !read_activation(node, spec, why)) return std::nullopt;
  return spec;
}

std::string MatMulConfig::text() const {
  return "rows=" + std::to_string(rows) + ",vectors=" + std::to_string(vectors) + ",parallel=" + (parallel_cols ? "cols" : "rows") +
         (prefetch ? ",prefetch=1" : "") + (prefetch_residual ? ",prefetch_residual=1" : "") +
         (k_block ? ",kblock=" + std::to_string(k_block) : "");
}

std::optional<MatMulConfig> MatMulConfig::parse(const std::string& text) {
  MatMulConfig c;
  char parallel[8] = {};
  int used = 0;
  if (std::sscanf(text.c_str(), "rows=%d,vectors=%d,parallel=%4[a-z]%n", &c.rows, &c.vectors, parallel, &used) != 3)
    return std::nullopt;
  std::string rest = text.substr(static_cast<std::size_t>(used));
  if (rest.rfind(",prefetch=1", 0) == 0) {
    c.prefetch = true;
    rest = rest.substr(11);
  }
  if (rest.rfind(",prefetch_residual=1", 0) == 0) {
    c.prefetch_residual = true;
    rest = rest.substr(20);
  }
  if (!rest.empty()) {
    int block = 0, end = 0;
    if (std::sscanf(rest.c_str(), ",kblock=%d%n", &block, &end) != 1 || static_cast<std::size_t>(end) != rest.size() ||
        rest != ",kblock=" + std::to_string(block) || block <= 0)
      return std::nullopt;
    c.k_block = block;
  }
  const std::string p = parallel;
  if ((p != "rows" && p != "cols") || c.rows < 1 || c.rows > 16 || c.vectors < 1 || c.vectors > 8) return std::nullopt;
  c.parallel_cols = p == "cols";
  if (c.k_block != 0 && (c.k_block < 8 || c.k_block > 4096 || !c.parallel_cols || c.prefetch || c.prefetch_residual))
    return std::nullopt;
  return c;
}

std::vector<int> k_blocks(std::int64_t k) {
  std::vector<int> out;
  // Two blocks at least: one block and a sliver reloads the partial sums for little.
  for (int block : {256, 512})
    if (2 * std::int64_t{block} <= k) out.push_back(block);
  return out;
}

std::vector<MatMulConfig> matmul_configs(int vector_registers) {
  std::vector<MatMulConfig> out;
  for (bool cols : {false, true})
    for (int rows : {4, 6, 2, 1, 8, 12, 14})
      for (int vectors : {2, 1, 3, 4})
        if (rows * vectors + vectors + 1 <= vector_registers) out.push_back({rows, vectors, cols});
  return out;
}

Compute matmul_compute(const MatMulSpec& spec) {
  Var i = dynamic_var("i"), j = var("j", spec.n), k = var("k", spec.k);
  Buffer a = buffer("a", {kDynamic, spec.k});
  Buffer b = spec.transposed_b ? buffer("b", {spec.n, spec.k}) : buffer("b", {spec.k, spec.n});
  std::vector<Buffer> inputs = {a, b};
  const Expr epilogue = epilogue_expr(spec, j, {i, j}, {kDynamic, spec.n}, inputs);
  const Expr b_at = spec.transposed_b ? load(b, {j, k}) : load(b, {k, j});
  return compute("matmul", buffer("y", {kDynamic, spec.n}), {i, j}, {k}, load(a, {i, k}) * b_at, epilogue, inputs);
}

Schedule matmul_schedule(const Compute& c, const MatMulConfig& config, int lanes, bool pack_b) {
  Schedule s(c);
  const Var& i = c.axes[0];
  const Var& j = c.axes[1];
  const Var& k = c.reduce[0];
  const auto [io, ii] = s.split(i, config.rows);
  const auto [jo, ji] = s.split(j, std::min<std::int64_t>(std::int64_t{config.vectors} * lanes, j->extent));
  if (config.k_block > 0) {
    if (!config.parallel_cols || config.prefetch) throw std::invalid_argument("a product in blocks of K is parallel over column tiles and does not prefetch");
    const auto [ko, ki] = s.split(k, std::min<std::int64_t>(config.k_block, k->extent));
    s.reorder({ko, jo, io, ki, ii, ji});
    s.parallel(jo);
  } else if (config.parallel_cols) {
    s.reorder({jo, io, k, ii, ji});
    s.parallel(jo);
  } else {
    s.reorder({io, jo, k, ii, ji});
    s.parallel(io);
  }
  s.unroll(ii);
  s.vectorize(ji);
  if (pack_b) {
    s.pack(c.inputs[1], j);
    if (config.prefetch) s.prefetch_next(c.inputs[1], jo);
  }
  if (config.prefetch_residual) s.prefetch_epilogue(residual_input(c));
  return s;
}

}  // namespace wpk::gen
