#include "runtime/batch_parts.hpp"

#include <cstring>
#include <map>

#include "runtime/cache_key.hpp"
#include "wpk/error.hpp"

namespace wpk {

int possible_batch_parts(const std::vector<const Tensor*>& inputs, int threads) {
  if (threads < 2 || inputs.empty()) return 1;
  std::int64_t rows = -1;
  for (const Tensor* t : inputs) {
    if (t->empty() || t->is_sequence() || t->on_device() || t->dtype() == DType::String || t->shape().empty()) return 1;
    if (rows >= 0 && t->shape()[0] != rows) return 1;
    rows = t->shape()[0];
  }
  return rows >= threads && rows % threads == 0 ? threads : 1;
}

std::vector<Tensor> batch_part(const std::vector<const Tensor*>& inputs, int part, int parts) {
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (const Tensor* t : inputs) {
    Shape shape = t->shape();
    const std::int64_t rows = shape[0] / parts;
    const std::size_t row_bytes = shape[0] == 0 ? 0 : t->nbytes() / static_cast<std::size_t>(shape[0]);
    shape[0] = rows;
    char* base = static_cast<char*>(const_cast<void*>(t->raw()));
    out.push_back(Tensor::borrow(base + static_cast<std::size_t>(part * rows) * row_bytes, t->dtype(), shape));
  }
  return out;
}

std::vector<Tensor> join_batch_parts(const std::vector<std::vector<Tensor>>& parts) {
  std::vector<Tensor> out;
  for (std::size_t k = 0; k < parts.front().size(); ++k) {
    const Tensor& first = parts.front()[k];
    if (first.is_sequence() || first.dtype() == DType::String || first.shape().empty())
      throw Error(ErrorCode::Internal, "batch parts: output " + std::to_string(k) + " has no rows to join");
    Shape shape = first.shape();
    for (std::size_t p = 1; p < parts.size(); ++p) {
      const Tensor& t = parts[p][k];
      if (t.dtype() != first.dtype() || t.shape().size() != shape.size() ||
          !std::equal(shape.begin() + 1, shape.end(), t.shape().begin() + 1))
        throw Error(ErrorCode::Internal, "batch parts: output " + std::to_string(k) + " differs in shape between parts");
      shape[0] += t.shape()[0];
    }
    Tensor joined = Tensor::zeros(first.dtype(), shape);
    char* to = static_cast<char*>(joined.raw());
    for (const auto& part : parts) {
      std::memcpy(to, part[k].raw(), part[k].nbytes());
      to += part[k].nbytes();
    }
    out.push_back(std::move(joined));
  }
  return out;
}

std::string model_fingerprint(const Graph& graph) {
  std::string s = "opset=" + std::to_string(graph.opset()) + ";";
  const auto name = [&](ValueId v) { return v == kNoValue ? std::string() : graph.value(v).name; };
  for (ValueId v : graph.inputs()) s += "in:" + name(v) + ";";
  for (const Node& n : graph.nodes()) {
    s += n.domain + "/" + n.op_type + "(";
    for (ValueId v : n.inputs) s += name(v) + ",";
    s += ")->(";
    for (ValueId v : n.outputs) s += name(v) + ",";
    s += ")";
    for (const auto& [key, a] : n.attributes) s += key + ",";
    s += ";";
  }
  std::map<std::string, std::string> constants;  // by name: the graph's map has no stable order
  for (const auto& [v, t] : graph.initializers()) {
    std::string& dims = constants[name(v)];
    for (std::int64_t d : t.shape()) dims += std::to_string(d) + ",";
  }
  for (const auto& [n, dims] : constants) s += "w:" + n + "[" + dims + "];";
  for (ValueId v : graph.outputs()) s += "out:" + name(v) + ";";
  return hex64(fnv1a64(s));
}

std::optional<ShapeSignature> declared_signature(const Graph& graph) {
  ShapeSignature sig;
  for (ValueId v : graph.inputs()) {
    const ValueInfo& info = graph.value(v);
    if (!info.dims) return std::nullopt;
    sig.push_back(static_cast<std::int64_t>(info.dims->size()));
    for (const Dim& d : *info.dims) {
      if (!d.is_static()) return std::nullopt;
      sig.push_back(d.value);
    }
  }
  return sig;
}

std::string batch_parts_key(const std::string& fingerprint, const ShapeSignature& signature, int threads) {
  std::string s = "batch_parts|model=" + fingerprint + "|shapes=";
  for (std::int64_t d : signature) s += std::to_string(d) + ",";
  return s + "|threads=" + std::to_string(threads);
}

std::string record_batch_parts(int parts) { return "parts=" + std::to_string(parts); }

int parse_batch_parts(const std::string& value) {
  if (value.rfind("parts=", 0) != 0) return 1;
  try {
    const int n = std::stoi(value.substr(6));
    return n > 1 ? n : 1;
  } catch (const std::exception&) {
    return 1;
  }
}

}  // namespace wpk
