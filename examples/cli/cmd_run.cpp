// wpk run MODEL [--inputs DIR] [--outputs DIR] [--disable PASS,...]: inputs in the ONNX test-data layout
// (input_0.pb, ... in the model's input order), outputs written as output_0.pb, ...
#include <cstdio>
#include <filesystem>

#include "cli.hpp"

namespace wpk::cli {

int cmd_run(const Args& args) {
  namespace fs = std::filesystem;
  Graph graph = load(args.positional[0]);
  SessionOptions options = base_options(args);
  // One run, then exit: kernels compiled after load would be stopped half-way.
  options.compile_in_background = false;
  fix_dims_for_device(options, graph, args);
  Session session(std::move(graph), options);
  const TensorMap inputs = command_inputs(session, args);
  TensorMap outputs;
  with_inputs_hint(args, [&] { outputs = session.run(inputs); });
  const fs::path out_dir = args.get("--outputs", "");
  if (!out_dir.empty()) {
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) throw Error(ErrorCode::Io, "cannot create outputs folder '" + out_dir.string() + "': " + ec.message());
  }
  for (std::size_t i = 0; i < session.outputs().size(); ++i) {
    const std::string& name = session.outputs()[i].name;
    const Tensor& t = outputs.at(name);
    if (!out_dir.empty()) save_tensor(t, (out_dir / ("output_" + std::to_string(i) + ".pb")).string());
    std::printf("output %zu '%s': %s %s\n", i, name.c_str(), dtype_name(t.dtype()), shape_to_string(t.shape()).c_str());
  }
  return 0;
}

}  // namespace wpk::cli
