#pragma once
// Whether a graph computes each row of its batch on its own: every graph output's row n (along
// dim 0) depends on the inputs' rows n alone, and on nothing else that changes with the batch
// size. Such a model's batch may be split into parts that run at once on separate threads
// (Session, "batch parts") with the same answer per row.
//
// The check is conservative: it follows the ops whose row independence it can prove from their
// attributes and declared shapes (element-wise ops, convolutions, pooling, normalisations over
// other axes, products whose batched operand keeps dim 0, and wpk's fused ops built from those)
// and answers no for anything else a batched value reaches (Shape, a Reshape whose target does
// not keep dim 0, reductions or concatenations over dim 0, control flow, ...).
#include <string>

#include "wpk/graph.hpp"

namespace wpk {

// "" when every output row depends on its input row alone; else why not (the first node, or
// input or output, that breaks it), for the log.
std::string why_rows_depend_on_each_other(const Graph& graph);

}  // namespace wpk
