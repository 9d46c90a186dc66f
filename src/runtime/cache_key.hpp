#pragma once
// Keys for what wpk caches on disk (DESIGN.md, "Cache keys"): everything that changes the answer.
//   op signature   op, domain, opset, input shapes/dtypes (and which inputs are constants),
//                  attributes (tensor attributes by content hash)
//   environment    device fingerprint (CPU model, ISA flags, CPU count), compiler (__VERSION__),
//                  the wpk cache-format version
// Backend names and versions are added by the user of the key (tuning_db: every candidate's).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wpk/graph.hpp"

namespace wpk {

// Bumped whenever the meaning or layout of a cache entry changes: older entries then no longer
// match and are rebuilt.
constexpr int kCacheFormatVersion = 1;

// 64-bit FNV-1a: keys and entry checksums (detects torn or edited entries, not attacks).
std::uint64_t fnv1a64(const std::string& bytes);
// A 64-bit hash of a block of memory at memory speed, for telling large constants apart within a
// process; not stable across versions of wpk, so never written to a file.
std::uint64_t hash_memory(const void* data, std::size_t bytes);
std::string hex64(std::uint64_t v);

// "model=...;flags=avx2,avx512f,...;cpus=N" from the CPU probe (core/cpu_features.hpp).
const std::string& device_fingerprint();
// Device fingerprint + compiler + cache-format version.
const std::string& environment_key();

// The op signature of `node` as it runs with these inputs.
std::string op_signature(const Node& node, const Graph& graph, const std::vector<const Tensor*>& inputs);
// The same from descriptions of the inputs (nullopt: omitted), for a signature built before a
// run (at load, from the declared shapes) or for constants a run passes no tensor for.
struct InputDesc {
  DType dtype;
  Shape shape;
  bool constant;  // a weight: backends pack it at load
};
std::string op_signature(const Node& node, const Graph& graph, const std::vector<std::optional<InputDesc>>& inputs);
// The node's inputs as the graph declares them, symbolic dims as 1 (what a run at batch 1 passes);
// nullopt for omitted inputs and unknown shapes.
std::vector<std::optional<InputDesc>> declared_input_descs(const Node& node, const Graph& graph);
// Short, readable form for logs and the database's comment column: "Conv f32[1,3,224,224] ...".
std::string op_summary(const Node& node, const std::vector<const Tensor*>& inputs);

}  // namespace wpk
