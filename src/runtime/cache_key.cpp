#include "runtime/cache_key.hpp"

#include <cstdio>
#include <cstring>

#include "core/cpu_features.hpp"
#include "runtime/execution_plan.hpp"
#include "runtime/workload.hpp"

namespace wpk {
namespace {

void append_attribute(std::string& out, const Attribute& a) {
  using K = Attribute::Kind;
  switch (a.kind()) {
    case K::Int: out += "i:" + std::to_string(a.i()); break;
    case K::Float: {
      std::uint32_t bits;  // exact: bit pattern, not a rounded decimal
      const float f = a.f();
      std::memcpy(&bits, &f, sizeof bits);
      out += "f:" + std::to_string(bits);
      break;
    }
    case K::String: out += "s:" + std::to_string(a.s().size()) + ":" + a.s(); break;
    case K::Tensor: {
      const Tensor& t = a.t();
      const std::string bytes(static_cast<const char*>(t.raw()), t.nbytes());
      out += std::string("t:") + dtype_name(t.dtype()) + shape_to_string(t.shape()) + "#" + hex64(fnv1a64(bytes));
      break;
    }
    case K::Graph: out += "g"; break;  // subgraph ops are not tuned: a marker is enough
    case K::Ints:
      out += "I:";
      for (auto v : a.ints()) out += std::to_string(v) + ",";
      break;
    case K::Floats:
      out += "F:";
      for (float f : a.floats()) {
        std::uint32_t bits;
        std::memcpy(&bits, &f, sizeof bits);
        out += std::to_string(bits) + ",";
      }
      break;
    case K::Strings:
      out += "S:";
      for (const auto& s : a.strings()) out += std::to_string(s.size()) + ":" + s + ",";
      break;
  }
}

}  // namespace

std::uint64_t fnv1a64(const std::string& bytes) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::uint64_t hash_memory(const void* data, std::size_t bytes) {
  // Eight independent lanes of 64-bit words (the compiler vectorises them), folded at the end; the
  // tail bytes and the length go into the fold.
  constexpr std::uint64_t kPrime = 0x9E3779B97F4A7C15ull;
  std::uint64_t lane[8];
  for (int i = 0; i < 8; ++i) lane[i] = kPrime * static_cast<std::uint64_t>(i + 1);
  const auto* p = static_cast<const unsigned char*>(data);
  std::size_t words = bytes / 8;
  for (; words >= 8; words -= 8, p += 64)
    for (int i = 0; i < 8; ++i) {
      std::uint64_t w;
      std::memcpy(&w, p + 8 * i, sizeof w);
      lane[i] = (lane[i] ^ w) * kPrime;
      lane[i] ^= lane[i] >> 29;
    }
  std::uint64_t h = bytes;
  for (int i = 0; i < 8; ++i) h = (h ^ lane[i]) * kPrime;
  for (std::size_t rest = words * 8 + bytes % 8; rest > 0; --rest, ++p) h = (h ^ *p) * 1099511628211ull;
  return h ^ (h >> 32);
}

std::string hex64(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

const std::string& device_fingerprint() {
  static const std::string fp = cpu_features().fingerprint();
  return fp;
}

const std::string& environment_key() {
  static const std::string key = device_fingerprint() + ";compiler=" + __VERSION__ +
                                 ";format=" + std::to_string(kCacheFormatVersion);
  return key;
}

std::string op_signature(const Node& node, const Graph& graph, const std::vector<const Tensor*>& inputs) {
  std::vector<std::optional<InputDesc>> descs;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const bool constant = i < node.inputs.size() && graph.is_initializer(node.inputs[i]);
    descs.push_back(inputs[i] ? std::optional<InputDesc>(InputDesc{inputs[i]->dtype(), inputs[i]->shape(), constant})
                              : std::nullopt);
  }
  return op_signature(node, graph, descs);
}

std::string op_signature(const Node& node, const Graph& graph, const std::vector<std::optional<InputDesc>>& inputs) {
  std::string sig = qualified_op(node) + ";opset=" + std::to_string(graph.opset()) + ";in=";
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) {
      sig += "none|";
      continue;
    }
    // Whether an input is a constant matters: backends pack constant weights at load.
    sig += std::string(dtype_name(inputs[i]->dtype)) + shape_to_string(inputs[i]->shape) + (inputs[i]->constant ? "c" : "") +
           "|";
  }
  sig += ";attr=";
  for (const auto& kv : node.attributes) {  // std::map: sorted by name, so the order is stable
    sig += kv.first + "=";
    append_attribute(sig, kv.second);
    sig += ";";
  }
  return sig;
}

std::vector<std::optional<InputDesc>> declared_input_descs(const Node& node, const Graph& graph) {
  const InputShapes shapes = *shapes_with_symbolic_dims_as(node, graph, 1);
  std::vector<std::optional<InputDesc>> out;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (!shapes[i]) {
      out.push_back(std::nullopt);
      continue;
    }
    const ValueId v = node.inputs[i];
    out.push_back(InputDesc{graph.value(v).dtype, *shapes[i], graph.is_initializer(v)});
  }
  return out;
}

std::string op_summary(const Node& node, const std::vector<const Tensor*>& inputs) {
  std::string s = qualified_op(node);
  for (const Tensor* t : inputs)
    if (t) {
      s += " ";
      s += dtype_name(t->dtype());
      s += shape_to_string(t->shape());
    }
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace wpk
