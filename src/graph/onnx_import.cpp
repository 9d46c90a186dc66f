// ONNX ModelProto -> wpk::Graph.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <onnx/onnx-data_pb.h>
#include <fcntl.h>
#include <unistd.h>

#include <climits>
#include <memory>
#include <set>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/api_boundary.hpp"
#include "graph/dtype_inference.hpp"
#include "graph/onnx_tensor.hpp"
#include "graph/onnx_contrib.hpp"
#include "graph/onnx_upgrade.hpp"
#include "graph/subgraph.hpp"
#include "wpk/wpk.hpp"

namespace wpk {
namespace {

constexpr std::int64_t kMinOpset = 7;
constexpr std::int64_t kMaxOpset = 22;

// Checks the path, then parses the file straight from disk: no copy of the bytes is held next to
// the parsed message, which keeps a large model's load peak near one copy of its weights.
template <typename Message>
void parse_file(const std::string& path, Message& msg, const std::string& what) {
  std::error_code ec;
  // Messages leave the path out: load() and load_tensor() put it in front of every error.
  if (!std::filesystem::exists(path, ec)) throw Error(ErrorCode::NotFound, "file not found");
  if (std::filesystem::is_directory(path, ec)) throw Error(ErrorCode::InvalidArgument, "is a directory, not a file");
  const auto size = std::filesystem::file_size(path, ec);
  // A protobuf message cannot exceed 2 GiB; larger models keep their weights in external files.
  if (ec || size > static_cast<std::uintmax_t>(INT_MAX))
    throw Error(ErrorCode::InvalidModel, "larger than 2 GiB; store weights as ONNX external data");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorCode::Io, "cannot open the file");
  // Read in 1 MiB blocks (the default, 8 KiB, is a system call per 8 KiB of weights). Not
  // mapped: a file truncated while mapped would end the process with SIGBUS.
  google::protobuf::io::FileInputStream raw(fd, 1 << 20);
  raw.SetCloseOnDelete(true);
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT_MAX);
  if (!msg.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    throw Error(ErrorCode::InvalidModel, what + " is not a valid ONNX protobuf (truncated or not ONNX)");
}

template <typename Message>
void parse_message(const std::string& bytes, Message& msg, const std::string& what) {
  if (bytes.size() > static_cast<std::size_t>(INT_MAX)) throw Error(ErrorCode::InvalidModel, what + " is larger than 2 GiB");
  google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT_MAX);
  if (!msg.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    throw Error(ErrorCode::InvalidModel, what + " is not a valid ONNX protobuf (truncated or not ONNX)");
}

// The tensor type a value declares: its own, or an optional's element's.
const onnx::TypeProto* tensor_or_optional(const onnx::TypeProto& t) {
  if (t.has_optional_type()) return &t.optional_type().elem_type();
  return &t;
}

DType value_dtype(const onnx::ValueInfoProto& v) {
  const onnx::TypeProto& t = *tensor_or_optional(v.type());
  if (t.has_sequence_type()) return DType::Sequence;
  if (!t.has_tensor_type()) return DType::Undefined;
  return static_cast<DType>(t.tensor_type().elem_type());
}

// Sequences and optionals: what ValueInfo says beyond the dtype.
void read_container_type(const onnx::ValueInfoProto& v, ValueInfo& info) {
  info.optional = info.optional || v.type().has_optional_type();
  const onnx::TypeProto& t = *tensor_or_optional(v.type());
  if (t.has_sequence_type() && t.sequence_type().elem_type().has_tensor_type() && info.element_dtype == DType::Undefined)
    info.element_dtype = static_cast<DType>(t.sequence_type().elem_type().tensor_type().elem_type());
}

// Names exporters write for "unknown", not for "equal to every other dimension of this name":
// `?` and its kin, and Paddle's p2o.DynamicDimension.N, which it repeats for unrelated axes.
// Such a dimension is imported as unknown, so it ties no two dimensions together.
bool is_placeholder_dim_name(const std::string& name) {
  static const char* const kNames[] = {"?", "*", "-1", "None", "none", "unk", "unknown"};
  for (const char* n : kNames)
    if (name == n) return true;
  return name.rfind("p2o.DynamicDimension", 0) == 0;
}

std::optional<DimList> value_dims(const onnx::ValueInfoProto& v) {
  const onnx::TypeProto& t = *tensor_or_optional(v.type());
  if (!t.has_tensor_type() || !t.tensor_type().has_shape()) return std::nullopt;
  DimList dims;
  for (const auto& d : t.tensor_type().shape().dim()) {
    if (d.has_dim_value()) dims.emplace_back(static_cast<std::int64_t>(d.dim_value()));
    else if (d.has_dim_param() && !is_placeholder_dim_name(d.dim_param())) dims.emplace_back(d.dim_param());
    else dims.emplace_back(std::int64_t{-1});
  }
  return dims;
}

Attribute convert_attribute(const onnx::AttributeProto& a, const std::string& where, const std::string& base_dir) {
  using A = onnx::AttributeProto;
  switch (a.type()) {
    case A::INT: return Attribute(static_cast<std::int64_t>(a.i()));
    case A::FLOAT: return Attribute(a.f());
    case A::STRING: return Attribute(a.s());
    case A::TENSOR: return Attribute(onnx_import::tensor_from_proto(a.t(), base_dir, where + " attribute '" + a.name() + "'"));
    case A::INTS: return Attribute(std::vector<std::int64_t>(a.ints().begin(), a.ints().end()));
    case A::FLOATS: return Attribute(std::vector<float>(a.floats().begin(), a.floats().end()));
    case A::STRINGS: return Attribute(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case A::TYPE_PROTO: {
      // Optional's and SequenceEmpty-like types: kept as the dtype they name (DType::Sequence
      // for a sequence), which is what the kernels and dtype inference read.
      const onnx::TypeProto& t = *tensor_or_optional(a.tp());
      if (t.has_sequence_type()) return Attribute(static_cast<std::int64_t>(DType::Sequence));
      if (t.has_tensor_type()) return Attribute(static_cast<std::int64_t>(t.tensor_type().elem_type()));
      throw Error(ErrorCode::Unsupported, where + ": attribute '" + a.name() + "' names a type wpk does not support");
    }
    default:
      throw Error(ErrorCode::Unsupported, where + ": attribute '" + a.name() + "' has a kind wpk does not support (type " +
                                              std::to_string(a.type()) + ")");
  }
}

// Control flow nests graphs in node attributes; deeper nesting than this is refused before the
// recursion could exhaust the stack.
constexpr int kMaxSubgraphDepth = 16;

void import_inputs(const onnx::GraphProto& gp, Graph& g, const std::string& what);
void import_nodes_and_outputs(const onnx::GraphProto& gp, Graph& g, const std::string& base_dir, int depth);

// Names `gp` (and the graphs nested in it) read without defining them: values of enclosing
// graphs, appended to `out` in the order they are first read.
void collect_free_names(const onnx::GraphProto& gp, std::vector<std::string>& out, int depth) {
  if (depth > kMaxSubgraphDepth)
    throw Error(ErrorCode::Unsupported, "subgraphs nest deeper than " + std::to_string(kMaxSubgraphDepth) + " levels");
  std::set<std::string> defined;
  for (const auto& v : gp.input()) defined.insert(v.name());
  for (const auto& t : gp.initializer()) defined.insert(t.name());
  for (const auto& n : gp.node())
    for (const auto& o : n.output()) defined.insert(o);
  std::set<std::string> listed(out.begin(), out.end());
  auto read = [&](const std::string& name) {
    if (!name.empty() && !defined.count(name) && listed.insert(name).second) out.push_back(name);
  };
  for (const auto& n : gp.node()) {
    for (const auto& i : n.input()) read(i);
    for (const auto& a : n.attribute()) {
      std::vector<std::string> inner;
      if (a.type() == onnx::AttributeProto::GRAPH) collect_free_names(a.g(), inner, depth + 1);
      for (const auto& sub : a.graphs()) collect_free_names(sub, inner, depth + 1);
      for (const auto& name : inner) read(name);
    }
  }
  for (const auto& o : gp.output()) read(o.name());
}

// One subgraph of a node: its own inputs first, then one input per captured outer value (named as
// in the outer graph, which the node passes as its trailing inputs in the same order), the outer
// constants it reads copied in as its own initializers (shared bytes), then its nodes.
// `hints`: dtypes for its own inputs that the graph may leave undeclared (a Loop body's iteration
// count, condition and carried values take the dtypes the node passes them).
std::shared_ptr<const Graph> import_subgraph(const onnx::GraphProto& sp, const Graph& outer,
                                             const std::vector<std::string>& captured, const std::vector<DType>& hints,
                                             const std::string& base_dir, int depth, const std::string& where) {
  auto sub = std::make_shared<Graph>();
  sub->set_opset(outer.opset());
  sub->set_name(sp.name());
  for (const auto& init : sp.initializer()) {
    if (init.name().empty()) throw Error(ErrorCode::InvalidModel, where + ": an initializer has no name");
    if (sub->find_value(init.name()) != kNoValue)
      throw Error(ErrorCode::InvalidModel, where + ": initializer '" + init.name() + "' is defined twice");
    sub->add_initializer(init.name(), onnx_import::tensor_from_proto(init, base_dir, where + " initializer '" + init.name() + "'"));
  }
  if (sp.sparse_initializer_size() > 0) throw Error(ErrorCode::Unsupported, where + ": sparse initializers are not supported");
  import_inputs(sp, *sub, where);
  for (std::size_t i = 0; i < hints.size() && i < sub->inputs().size(); ++i) {
    ValueInfo& v = sub->mutable_value(sub->inputs()[i]);
    if (v.dtype == DType::Undefined) v.dtype = hints[i];
  }
  for (const auto& name : captured) {
    const ValueInfo& v = outer.value(outer.value_id(name));
    if (sub->find_value(name) != kNoValue)
      throw Error(ErrorCode::InvalidModel, where + " defines '" + name + "', which it also reads from the enclosing graph");
    sub->add_input(name, v.dtype, v.dims ? *v.dims : DimList{});
    if (!v.dims) sub->mutable_value(sub->inputs().back()).dims.reset();
  }
  std::vector<std::string> reads;
  collect_free_names(sp, reads, depth);
  for (const auto& name : reads) {
    const ValueId id = outer.find_value(name);
    if (id != kNoValue && outer.is_initializer(id) && sub->find_value(name) == kNoValue)
      sub->add_initializer(name, *outer.initializer(id));
  }
  import_nodes_and_outputs(sp, *sub, base_dir, depth);
  return sub;
}

void import_nodes(const onnx::GraphProto& gp, Graph& g, const std::string& base_dir, int depth) {
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    const std::string name = np.name().empty() ? np.op_type() + "_" + std::to_string(i) : np.name();
    const std::string where = "node '" + name + "' (" + np.op_type() + ")";
    std::map<std::string, Attribute> attrs;
    std::vector<const onnx::AttributeProto*> graphs;
    for (const auto& a : np.attribute()) {
      if (a.type() == onnx::AttributeProto::GRAPH) {
        graphs.push_back(&a);
        continue;
      }
      if (a.type() == onnx::AttributeProto::GRAPHS)
        throw Error(ErrorCode::Unsupported, where + ": attribute '" + a.name() + "' is a list of graphs, which wpk does not support");
      // Attributes that refer to a parent function's attribute only occur inside functions.
      if (!a.ref_attr_name().empty())
        throw Error(ErrorCode::Unsupported, where + ": attribute references are not supported");
      attrs.emplace(a.name(), convert_attribute(a, where, base_dir));
    }
    std::vector<std::string> ins(np.input().begin(), np.input().end());
    std::vector<std::string> outs(np.output().begin(), np.output().end());
    if (!graphs.empty()) {
      // The values of this graph (and of the graphs around it) that the subgraphs read: constants
      // are copied into them; the others become trailing inputs of the node, so passes, the memory
      // plan and the run order see the dependence. `__captured` says how many there are.
      std::vector<std::string> reads;
      for (const auto* a : graphs) collect_free_names(a->g(), reads, depth + 1);
      std::vector<std::string> captured;
      for (const auto& r : reads) {
        const ValueId id = g.find_value(r);
        if (id == kNoValue)
          throw Error(ErrorCode::InvalidModel, where + ": a subgraph reads '" + r + "', which nothing before the node defines");
        if (!g.is_initializer(id)) captured.push_back(r);
      }
      infer_dtypes(g);  // the captured values' dtypes, from the nodes before this one
      std::vector<DType> hints;
      auto dtype_of = [&](const std::string& v) { return v.empty() ? DType::Undefined : g.value(g.value_id(v)).dtype; };
      if (np.op_type() == "Loop") hints = {DType::Int64, DType::Bool};
      for (std::size_t k = np.op_type() == "Loop" ? 2 : 0; np.op_type() != "If" && np.op_type() != "SequenceMap" && k < ins.size(); ++k)
        hints.push_back(dtype_of(ins[k]));
      for (const auto* a : graphs)
        attrs.insert_or_assign(a->name(), Attribute(import_subgraph(a->g(), g, captured, hints, base_dir, depth + 1,
                                                                    where + " " + a->name())));
      ins.insert(ins.end(), captured.begin(), captured.end());
      attrs.insert_or_assign("__captured", Attribute(static_cast<std::int64_t>(captured.size())));
    }
    for (const auto& o : outs)
      if (!o.empty() && g.find_value(o) != kNoValue)
        throw Error(ErrorCode::InvalidModel, where + ": output '" + o + "' is already defined");
    Node& n = g.add_node(np.op_type(), ins, outs, std::move(attrs), name);
    n.domain = np.domain() == "ai.onnx" ? "" : np.domain();
    if (is_control_flow(n))
      if (const std::string problem = control_flow_signature_problem(n, g.opset()); !problem.empty())
        throw Error(ErrorCode::InvalidModel, where + ": " + problem);
  }
}

void import_inputs(const onnx::GraphProto& gp, Graph& g, const std::string& what) {
  for (const auto& in : gp.input()) {
    if (g.find_value(in.name()) != kNoValue) continue;  // IR < 4 lists initializers as inputs too
    const DType dt = value_dtype(in);
    if (in.type().has_map_type() || in.type().has_sparse_tensor_type())
      throw Error(ErrorCode::Unsupported, what + " input '" + in.name() + "' is a map or sparse tensor, which wpk does not support");
    auto dims = value_dims(in);
    g.add_input(in.name(), dt, dims ? *dims : DimList{});
    ValueInfo& info = g.mutable_value(g.inputs().back());
    if (!dims) info.dims.reset();
    read_container_type(in, info);
  }
}

void import_nodes_and_outputs(const onnx::GraphProto& gp, Graph& g, const std::string& base_dir, int depth) {
  import_nodes(gp, g, base_dir, depth);
  for (const auto& vi : gp.value_info()) {
    ValueId id = g.find_value(vi.name());
    if (id == kNoValue || g.is_initializer(id)) continue;
    ValueInfo& v = g.mutable_value(id);
    if (v.dtype == DType::Undefined) v.dtype = value_dtype(vi);
    if (!v.dims) v.dims = value_dims(vi);
    read_container_type(vi, v);
  }
  for (const auto& out : gp.output()) {
    ValueId id = g.find_value(out.name());
    if (id == kNoValue)
      throw Error(ErrorCode::InvalidModel, "graph output '" + out.name() + "' is not produced by any node");
    ValueInfo& v = g.mutable_value(id);
    if (v.dtype == DType::Undefined) v.dtype = value_dtype(out);
    if (!v.dims) v.dims = value_dims(out);
    read_container_type(out, v);
    g.add_output(out.name());
  }
  if (g.outputs().empty()) throw Error(ErrorCode::InvalidModel, "the graph has no outputs");
  infer_dtypes(g);
}

// Frees a converted initializer's bytes at once, so the proto and the tensors never both hold
// every weight.
void release_data(onnx::TensorProto& t) {
  std::string().swap(*t.mutable_raw_data());
  t.clear_float_data();
  t.clear_int32_data();
  t.clear_int64_data();
  t.clear_double_data();
  t.clear_uint64_data();
}

Graph import_model(onnx::ModelProto& model, const std::string& base_dir) {
  if (!model.has_graph()) throw Error(ErrorCode::InvalidModel, "the file has no graph: not an ONNX model");
  std::int64_t opset = -1;
  for (const auto& op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") opset = op.version();
  if (opset < 0) {
    if (model.opset_import_size() == 0) opset = 1;  // IR < 3 models had no opset_import: opset 1
    else opset = kMaxOpset;  // only other domains are imported; their nodes are checked per op
  }
  if (opset >= 1 && opset < kMinOpset) {
    onnx_import::upgrade_opset(model, opset, kMinOpset);
    opset = kMinOpset;
  }
  if (opset < 1 || opset > kMaxOpset)
    throw Error(ErrorCode::Unsupported, "the model uses ONNX opset " + std::to_string(opset) + "; wpk supports opsets 1 to " +
                                            std::to_string(kMaxOpset) + " (1 to " + std::to_string(kMinOpset - 1) +
                                            " converted to " + std::to_string(kMinOpset) + ")");
  onnx_import::expand_quantized_contrib_ops(model, opset);
  const onnx::GraphProto& gp = model.graph();
  Graph g;
  g.set_opset(opset);
  g.set_name(gp.name());
  for (auto& init : *model.mutable_graph()->mutable_initializer()) {
    if (init.name().empty()) throw Error(ErrorCode::InvalidModel, "an initializer has no name");
    if (g.find_value(init.name()) != kNoValue)
      throw Error(ErrorCode::InvalidModel, "initializer '" + init.name() + "' is defined twice");
    g.add_initializer(init.name(), onnx_import::tensor_from_proto(std::move(init), base_dir, "initializer '" + init.name() + "'"));
    release_data(init);
  }
  if (gp.sparse_initializer_size() > 0) throw Error(ErrorCode::Unsupported, "sparse initializers are not supported");
  import_inputs(gp, g, "graph");
  import_nodes_and_outputs(gp, g, base_dir, 0);
  return g;
}

}  // namespace

Graph load_from_bytes(const std::string& bytes, const std::string& base_dir) {
  try {
    onnx::ModelProto model;
    parse_message(bytes, model, "the model");
    return import_model(model, base_dir);
  } catch (...) {
    rethrow_as_error();
  }
}

namespace {

// Runs `read`, putting the file's path in front of any error's message.
template <typename Read>
auto reading(const std::string& path, Read&& read) {
  try {
    return read();
  } catch (const Error& e) {
    throw Error(e.code(), "'" + path + "': " + e.what());
  } catch (...) {
    rethrow_as_error("'" + path + "': ");
  }
}

}  // namespace

Graph load(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return reading(path, [&] {
    onnx::ModelProto model;
    parse_file(path, model, "the model");
    return import_model(model, dir.empty() ? "." : dir);
  });
}

Tensor load_tensor(const std::string& path) {
  return reading(path, [&] {
    onnx::TensorProto proto;
    parse_file(path, proto, "the tensor file");
    return onnx_import::tensor_from_proto(proto, "", "tensor");
  });
}

namespace {

Tensor sequence_from_proto(const onnx::SequenceProto& s, DType element_dtype, const std::string& what) {
  if (s.elem_type() != onnx::SequenceProto::TENSOR && s.tensor_values_size() + s.sequence_values_size() + s.map_values_size() +
                                                            s.optional_values_size() > 0)
    throw Error(ErrorCode::Unsupported, what + ": only sequences of tensors are supported");
  std::vector<Tensor> items;
  for (const auto& t : s.tensor_values()) items.push_back(onnx_import::tensor_from_proto(t, "", what));
  return Tensor::sequence(std::move(items), items.empty() ? element_dtype : items.front().dtype());
}

}  // namespace

Tensor load_sequence(const std::string& path, DType element_dtype) {
  return reading(path, [&] {
    onnx::SequenceProto proto;
    parse_file(path, proto, "the sequence file");
    return sequence_from_proto(proto, element_dtype, "sequence");
  });
}

Tensor load_optional(const std::string& path, DType element_dtype) {
  return reading(path, [&] {
    onnx::OptionalProto proto;
    parse_file(path, proto, "the optional file");
    if (proto.has_tensor_value()) return onnx_import::tensor_from_proto(proto.tensor_value(), "", "optional");
    if (proto.has_sequence_value()) return sequence_from_proto(proto.sequence_value(), element_dtype, "optional");
    if (proto.elem_type() != onnx::OptionalProto::UNDEFINED && proto.elem_type() != onnx::OptionalProto::TENSOR &&
        proto.elem_type() != onnx::OptionalProto::SEQUENCE)
      throw Error(ErrorCode::Unsupported, "only optional tensors and sequences are supported");
    return Tensor::none();
  });
}

Tensor tensor_from_bytes(const std::string& bytes) {
  onnx::TensorProto proto;
  try {
    parse_message(bytes, proto, "the tensor");
    return onnx_import::tensor_from_proto(proto, "", "tensor");
  } catch (...) {
    rethrow_as_error();
  }
}

std::string tensor_to_bytes(const Tensor& tensor, const std::string& name) {
  onnx::TensorProto proto;
  onnx_import::tensor_to_proto(tensor, proto);
  proto.set_name(name);
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) throw Error(ErrorCode::Internal, "cannot serialize a tensor");
  return bytes;
}

void save_tensor(const Tensor& tensor, const std::string& path) {
  onnx::TensorProto proto;
  onnx_import::tensor_to_proto(tensor, proto);
  std::ofstream out(path, std::ios::binary);
  if (!out || !proto.SerializeToOstream(&out)) throw Error(ErrorCode::Io, "cannot write '" + path + "'");
}

}  // namespace wpk
