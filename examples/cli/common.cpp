#include <filesystem>
#include <random>

#include "cli.hpp"

namespace wpk::cli {

std::string Args::get(const std::string& f, const std::string& fallback) const {
  auto it = flags.find(f);
  return it == flags.end() ? fallback : it->second;
}

int Args::get_int(const std::string& f, int fallback, int min_value) const {
  auto it = flags.find(f);
  if (it == flags.end()) return fallback;
  std::size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != it->second.size() || v < min_value)
    throw Error(ErrorCode::InvalidArgument, f + " needs an integer >= " + std::to_string(min_value) + ", got '" + it->second + "'");
  return v;
}

Args parse_args(int argc, char** argv, int first, const std::vector<std::string>& switches,
                const std::vector<std::string>& valued, const std::vector<std::string>& positionals) {
  Args a;
  auto in = [](const std::vector<std::string>& v, const std::string& s) {
    for (const auto& x : v)
      if (x == s) return true;
    return false;
  };
  for (int i = first; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) != 0) {
      a.positional.push_back(s);
    } else if (in(switches, s)) {
      a.flags[s] = "";
    } else if (in(valued, s)) {
      if (i + 1 >= argc) throw Error(ErrorCode::InvalidArgument, s + " needs a value");
      std::string& slot = a.flags[s];
      slot += (slot.empty() ? "" : ",") + std::string(argv[++i]);  // repeated flags accumulate
    } else {
      throw Error(ErrorCode::InvalidArgument, "unknown option '" + s + "'");
    }
  }
  if (a.positional.size() != positionals.size()) {
    std::string want;
    for (const auto& p : positionals) want += (want.empty() ? "" : " and ") + p;
    throw Error(ErrorCode::InvalidArgument, "expected exactly the arguments " + want);
  }
  return a;
}

namespace {
// The items of a comma-separated flag value (repeated flags were joined with commas), empty
// items included.
std::vector<std::string> comma_items(const std::string& spec) {
  std::vector<std::string> items;
  std::size_t pos = 0;
  while (pos < spec.size()) {
    std::size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    items.push_back(spec.substr(pos, end - pos));
    pos = end + 1;
  }
  return items;
}
}  // namespace

SessionOptions base_options(const Args& args) {
  SessionOptions options;
  for (const std::string& pass : comma_items(args.get("--disable", "")))
    if (!pass.empty()) options.optimizer.disabled_passes.push_back(pass);
  for (const std::string& kernel : comma_items(args.get("--disable-kernels", "")))
    if (!kernel.empty()) options.disabled_kernels.push_back(kernel);
  static_cast<void>(Optimizer(options.optimizer));  // an unknown pass name is an error, optimized or not
  const std::string precision = args.get("--precision", "fp32");
  if (precision == "bf16") options.precision = Precision::BF16;
  else if (precision != "fp32") throw Error(ErrorCode::InvalidArgument, "--precision must be fp32 or bf16, got '" + precision + "'");
  const std::string device = args.get("--device", "cpu");
  if (device == "cuda") options.device = Device::CUDA;
  else if (device == "auto") options.device = Device::Auto;
  else if (device != "cpu") throw Error(ErrorCode::InvalidArgument, "--device must be cpu, cuda or auto, got '" + device + "'");
  return options;
}

std::map<std::string, std::int64_t> parse_dims(const Args& args) {
  std::map<std::string, std::int64_t> dims;
  for (const std::string& item : comma_items(args.get("--dim", ""))) {
    const std::size_t eq = item.find('=');
    std::int64_t v = -1;
    try {
      if (eq != std::string::npos) v = std::stoll(item.substr(eq + 1));
    } catch (const std::exception&) {
    }
    if (eq == std::string::npos || eq == 0 || v < 1)
      throw Error(ErrorCode::InvalidArgument, "--dim needs NAME=SIZE with SIZE >= 1, got '" + item + "'");
    dims[item.substr(0, eq)] = v;
  }
  return dims;
}

void fix_dims_for_device(SessionOptions& options, const Graph& graph, const Args& args) {
  if (options.device != Device::CPU && options.fixed_dims.empty())
    options.fixed_dims = input_dim_sizes(graph, args.get_int("--batch", 1, 1), parse_dims(args));
}

std::map<std::string, std::int64_t> input_dim_sizes(const Graph& graph, std::int64_t batch,
                                                    std::map<std::string, std::int64_t> dims) {
  for (ValueId v : graph.inputs()) {
    const auto& declared = graph.value(v).dims;
    if (declared && !declared->empty() && !declared->front().is_static() && !declared->front().symbol.empty())
      dims.emplace(declared->front().symbol, batch);  // an explicit --dim wins
  }
  return dims;
}

std::map<std::string, std::int64_t> command_dim_sizes(const Graph& graph, const Args& args) {
  namespace fs = std::filesystem;
  std::map<std::string, std::int64_t> dims = parse_dims(args);
  if (!args.has("--inputs")) return input_dim_sizes(graph, args.get_int("--batch", 1, 1), dims);
  const fs::path dir = args.get("--inputs", "");
  if (!fs::is_directory(dir)) throw Error(ErrorCode::NotFound, "inputs folder '" + dir.string() + "' not found");
  std::size_t i = 0;
  for (ValueId v : graph.inputs()) {
    if (graph.is_initializer(v)) continue;
    const fs::path file = dir / ("input_" + std::to_string(i++) + ".pb");
    const auto& declared = graph.value(v).dims;
    if (!declared || !fs::exists(file)) continue;  // the run that reads it names what is missing
    const Tensor t = load_tensor(file.string());
    if (t.rank() != static_cast<int>(declared->size())) continue;  // the session's input check says so
    for (std::size_t d = 0; d < declared->size(); ++d)
      if (!(*declared)[d].is_static() && !(*declared)[d].symbol.empty())
        dims.emplace((*declared)[d].symbol, t.shape()[d]);  // an explicit --dim wins
  }
  return dims;
}

TensorMap command_inputs(const Session& session, const Args& args) {
  namespace fs = std::filesystem;
  if (!args.has("--inputs")) return make_random_inputs(session, args.get_int("--batch", 1, 1), parse_dims(args));
  const fs::path dir = args.get("--inputs", "");
  if (!fs::is_directory(dir)) throw Error(ErrorCode::NotFound, "inputs folder '" + dir.string() + "' not found");
  TensorMap inputs;
  for (std::size_t i = 0; i < session.inputs().size(); ++i)
    inputs[session.inputs()[i].name] = load_tensor((dir / ("input_" + std::to_string(i) + ".pb")).string());
  return inputs;
}

void with_inputs_hint(const Args& args, const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& e) {
    if (args.has("--inputs")) throw;
    throw Error(e.code(), std::string(e.what()) + " (with random inputs; pass stored ones with --inputs DIR)");
  }
}

TensorMap make_random_inputs(const Session& session, std::int64_t batch, const std::map<std::string, std::int64_t>& dims) {
  std::mt19937_64 rng(20261121);
  TensorMap inputs;
  for (const ValueInfo& in : session.inputs()) {
    if (!in.dims) throw Error(ErrorCode::InvalidArgument, "input '" + in.name + "' has no declared shape; use --inputs");
    Shape shape;
    for (std::size_t i = 0; i < in.dims->size(); ++i) {
      const Dim& d = (*in.dims)[i];
      auto it = dims.find(d.symbol);
      if (d.is_static()) shape.push_back(d.value);
      else if (it != dims.end()) shape.push_back(it->second);
      else shape.push_back(i == 0 ? batch : 1);
    }
    Tensor t = Tensor::zeros(in.dtype, shape);
    std::uniform_real_distribution<double> real(-1.0, 1.0);
    std::uniform_int_distribution<int> integer(0, 99);
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      switch (in.dtype) {
        case DType::Float32: t.data<float>()[i] = static_cast<float>(real(rng)); break;
        case DType::Float64: t.data<double>()[i] = real(rng); break;
        case DType::Int64: t.data<std::int64_t>()[i] = integer(rng); break;
        case DType::Int32: t.data<std::int32_t>()[i] = integer(rng); break;
        case DType::Bool: t.data<bool>()[i] = integer(rng) % 2; break;
        default:
          throw Error(ErrorCode::Unsupported, "random inputs of dtype " + std::string(dtype_name(in.dtype)) +
                                                  " are not supported (input '" + in.name + "'); use --inputs");
      }
    }
    inputs[in.name] = t;
  }
  return inputs;
}

}  // namespace wpk::cli
