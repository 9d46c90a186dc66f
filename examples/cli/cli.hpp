#pragma once
// The `wpk` command-line tool: shared pieces of its subcommands.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "wpk/wpk.hpp"

namespace wpk::cli {

// Parsed command line: positional arguments (as many as `positionals` names) and --flags (a
// flag's value is the next argument, or "" for the switches listed in `switches`).
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;
  bool has(const std::string& f) const { return flags.count(f) != 0; }
  std::string get(const std::string& f, const std::string& fallback) const;
  int get_int(const std::string& f, int fallback, int min_value) const;
};
Args parse_args(int argc, char** argv, int first, const std::vector<std::string>& switches,
                const std::vector<std::string>& valued, const std::vector<std::string>& positionals = {"MODEL"});

// Deterministic inputs for every graph input: floats uniform in [-1, 1], integers in [0, 100),
// bools random; symbolic dims take `dims[symbol]`, else `batch` for the first dim, else 1.
TensorMap make_random_inputs(const Session& session, std::int64_t batch, const std::map<std::string, std::int64_t>& dims);
// The inputs `run` and `bench` feed: with --inputs DIR, DIR's input_0.pb, ... (the ONNX test-data
// layout, in the model's input order); else make_random_inputs for --batch and --dim.
TensorMap command_inputs(const Session& session, const Args& args);
// Calls `run`; where the inputs were random (no --inputs) an Error it throws says so and names
// --inputs: a model that takes only meaningful values (a decoder's token ids below its
// vocabulary) fails on random ones.
void with_inputs_hint(const Args& args, const std::function<void()>& run);
// SessionOptions from the flags every command shares: --disable PASS[,PASS] switches optimizer
// passes off by name, --disable-kernels BACKEND[:KERNEL][,...] leaves candidates out (an
// unknown name is an error when the Session is built), --precision fp32|bf16.
SessionOptions base_options(const Args& args);
// The GPU places only nodes of static shapes: with --device cuda or auto, the dims --batch and
// --dim set are fixed at load.
void fix_dims_for_device(SessionOptions& options, const Graph& graph, const Args& args);
// Parses repeated "--dim name=value" settings.
std::map<std::string, std::int64_t> parse_dims(const Args& args);
// The sizes make_random_inputs would give the graph's symbolic input dims, by name, for
// SessionOptions::fixed_dims: `dims` as given, and `batch` for symbolic first dims.
std::map<std::string, std::int64_t> input_dim_sizes(const Graph& graph, std::int64_t batch,
                                                    std::map<std::string, std::int64_t> dims);
// The sizes to fix at load for the inputs a command runs: with --inputs DIR, the stored tensors'
// (input_<i>.pb, in the graph's input order); else input_dim_sizes with --batch. --dim wins.
std::map<std::string, std::int64_t> command_dim_sizes(const Graph& graph, const Args& args);

// bench --profile / --trace (profile_report.cpp).
void print_profile_table(const std::vector<RunProfile>& runs);
void write_chrome_trace(const std::vector<RunProfile>& runs, const std::string& path);
// info --optimized --dot/--svg (graph_dot.cpp): the optimized graph in Graphviz's language, and
// written to a .dot file and/or drawn to an .svg by Graphviz's `dot` (an Error when it is missing).
std::string optimized_graph_dot(const Session& session, const PlanSummary& plan, const RunProfile& run);
void write_graph_picture(const std::string& dot, const std::string& dot_path, const std::string& svg_path);
// bench --idle: CPU ms the other threads of this process use during `sleep_ms` (idle_check.cpp).
double idle_cpu_ms(int sleep_ms);

int cmd_run(const Args& args);
int cmd_bench(const Args& args);
int cmd_info(const Args& args);
int cmd_tune(const Args& args);
int cmd_quantize(const Args& args);
// wpk cache ls|clear|prune [--dir DIR] (cmd_cache.cpp): parses its own arguments from argv[2].
int cmd_cache(int argc, char** argv);

}  // namespace wpk::cli
