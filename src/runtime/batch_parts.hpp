#pragma once
// Batch parts: a run whose model computes each row of its batch on its own
// (graph/batch_rows.hpp) may split the batch into one part per thread and run the parts at once,
// each on one thread, instead of running the whole batch with every node spread over the
// threads. Whether that is faster is measured (tuning at load, `wpk tune`), per model, input
// shapes and thread count, and kept in the tuning records; without a record the batch runs
// whole.
#include <optional>
#include <string>
#include <vector>

#include "runtime/plan_cache.hpp"
#include "wpk/graph.hpp"
#include "wpk/tensor.hpp"

namespace wpk {

// How many parts a run of these inputs could split into on `threads` threads: `threads` when
// every input is a host tensor of numbers whose dim 0 is one size B, a multiple of `threads`;
// else 1.
int possible_batch_parts(const std::vector<const Tensor*>& inputs, int threads);

// Part `part` of `parts` of the inputs: views of their rows, borrowed (read only).
std::vector<Tensor> batch_part(const std::vector<const Tensor*>& inputs, int part, int parts);

// The parts' outputs (per part, in the graph's output order) joined along dim 0.
std::vector<Tensor> join_batch_parts(const std::vector<std::vector<Tensor>>& parts);

// What identifies a model in the tuning records: its ops, their wiring and attributes' names,
// and its constants' shapes, as imported (before symbolic dims are fixed or passes run).
std::string model_fingerprint(const Graph& graph);

// The tuning record's key for the choice of parts at these input shapes on `threads` threads;
// its value is record_batch_parts(n).
std::string batch_parts_key(const std::string& fingerprint, const ShapeSignature& signature, int threads);
std::string record_batch_parts(int parts);
// A record's value read back: the parts, 1 for anything else.
int parse_batch_parts(const std::string& value);

// The signature of the graph's inputs as declared, when every dim is a number (fixed at load).
std::optional<ShapeSignature> declared_signature(const Graph& graph);

}  // namespace wpk
