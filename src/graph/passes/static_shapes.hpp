#pragma once
// What a graph fixes about shapes before run time, found by walking the nodes in order from the
// declared input dims and the initializers. A symbolic dim keeps its symbol, so two values of dims
// [N, 128] are known to have the same shape at every run (run() binds each symbol consistently).
//
// Besides dims it follows the contents of small integer tensors computed from shapes (Shape,
// Gather, Unsqueeze, Concat, ...), the way exporters build the target of a Reshape, so that
// Reshape(x, Concat(Shape(x)[0], 128, 12, 64)) has known dims [N, 128, 12, 64], and of an
// Expand: x.expand(n, -1, -1) is exported as a Where over Equal(target, -1) and
// ConstantOfShape, which ends as [N, 1, 192].
//
// Only common ops have a rule; whatever has none is unknown, which passes read as "don't".
#include <optional>
#include <string>
#include <vector>

#include "wpk/graph.hpp"

namespace wpk::passes {

// One element of a small integer tensor followed through shape arithmetic: a number (of any
// sign: a Reshape target holds -1), a symbolic dim, or unknown (neither).
struct IntElem {
  std::optional<std::int64_t> value;
  std::string symbol;
};
using IntData = std::vector<IntElem>;

class StaticShapes {
 public:
  explicit StaticShapes(const Graph& g);
  // Dims of v; nullptr when its rank is unknown. Single dims may be unknown (-1, no symbol).
  const DimList* dims(ValueId v) const;
  int rank(ValueId v) const;  // -1 when unknown
  // Elements of a rank-0/1 int32/int64 value followed from initializers and shapes, and their
  // dtype; nullptr / Undefined when not followed.
  const IntData* data(ValueId v) const;
  DType data_dtype(ValueId v) const;
  // True when a and b have the same shape at every run.
  bool same_shape(ValueId a, ValueId b) const;

 private:
  void infer(const Graph& g, const Node& n);
  void infer_shape_data(const Graph& g, const Node& n);
  void infer_arithmetic(const Node& n, const IntData& a, const IntData& b);
  void infer_equal(const Node& n, const IntData& a, const IntData& b);
  void infer_where(const Node& n, const IntData& cond, const IntData& x, const IntData& y);
  void infer_split(const Graph& g, const Node& n, const DimList& in);
  void set_dims(ValueId v, std::optional<DimList> d);
  void set_data(ValueId v, IntData d, DType dtype);
  std::vector<std::optional<DimList>> dims_;
  std::vector<std::optional<IntData>> data_;
  std::vector<DType> data_dtype_;
};

// Writes what StaticShapes found into the graph's ValueInfo where the model declared nothing
// (exporters rarely declare intermediates): backends then compile and pack weights at load for
// the shapes a run will have. Changes no node.
void annotate_static_shapes(Graph& g);

// Dims known equal at every run: the same number, or the same symbol.
bool same_dim(const Dim& a, const Dim& b);
bool all_static(const DimList& d);

}  // namespace wpk::passes
