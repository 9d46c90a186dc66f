#include "backends/cuda/kernel_search.hpp"

#include <future>
#include <limits>
#include <map>
#include <mutex>

#include "runtime/logging.hpp"
#include "runtime/measurement.hpp"
#include "search/strategy.hpp"

namespace wpk::cuda {
namespace {

class PredictedCost : public search::CostModel {
 public:
  explicit PredictedCost(const GeneratedCandidates& c) : c_(c) {}
  double predict(const search::Space& space, const search::Point& p) const override { return c_.predict(space, p); }

 private:
  const GeneratedCandidates& c_;
};

// The op's output as the host sees it, after `launch` on the region's stream.
Tensor output_after(const PrepareEnv& env, const std::vector<CUdeviceptr>& args, const std::function<void()>& launch) {
  launch();
  Tensor out = Tensor::zeros(DType::Float32, env.out.shape);
  check(driver().MemcpyDtoHAsync(out.raw(), args.back(), out.nbytes(), env.handles.stream()), "reading a candidate's output");
  env.handles.synchronize("checking a generated kernel against the library");
  return out;
}

// A generated kernel may win only with the library's result (as every CPU candidate must match
// the reference before it may win): both run on the same inputs, outputs compared on the host.
bool agrees_with_library(const PrepareEnv& env, const GeneratedCandidates& c, const GeneratedKernel& k,
                         const std::function<void()>& library) {
  const Tensor want = output_after(env, c.args, library);
  const Tensor got = output_after(env, c.args, [&] { k.launch(env.handles.stream(), c.args); });
  return outputs_agree(got, want);
}

}  // namespace

Choice search_generated(const PrepareEnv& env, const std::string& key, const std::string& what, const std::string& library_name,
                        const GeneratedCandidates& c, const std::function<void()>& library) {
  const search::Space space(c.knobs, c.valid);
  Choice choice;
  if (env.choices) {
    if (auto it = env.choices->find(key); it != env.choices->end()) {
      if (it->second == "library") return choice;
      if (const auto point = space.parse(it->second)) return {GeneratedKernel::obtain(c.print(space, *point), env.cubins), it->second};
    }
  }
  const double library_seconds = median_launch_seconds(env.handles, library);
  const std::string algorithm = env.search->algorithm == "compare" ? "grid" : env.search->algorithm;
  const PredictedCost model(c);
  auto strategy = search::make_strategy(search::parse_algorithm(algorithm), space, env.search->seed, &model);
  double best = std::numeric_limits<double>::infinity();
  std::size_t tried = 0;
  while (tried < env.search->trials) {
    const auto points = strategy->propose(std::min<std::size_t>(8, env.search->trials - tried));
    if (points.empty()) break;
    std::vector<std::future<std::shared_ptr<const GeneratedKernel>>> compiling;
    for (const auto& p : points)
      compiling.push_back(std::async(std::launch::async, [&, p] { return GeneratedKernel::obtain(c.print(space, p), env.cubins); }));
    for (std::size_t i = 0; i < points.size(); ++i, ++tried) {
      double seconds = std::numeric_limits<double>::infinity();
      std::shared_ptr<const GeneratedKernel> k;
      try {
        k = compiling[i].get();
        seconds = median_launch_seconds(env.handles, [&] { k->launch(env.handles.stream(), c.args); });
      } catch (const std::exception& e) {  // a schedule the printer refuses, a kernel that will not compile
        logger().debug("cuda {} {}: {} failed: {}", what, env.node.name, space.describe(points[i]), e.what());
      }
      strategy->observe(points[i], seconds);
      // Every trial, for fitting and checking the GPU cost model against the device.
      logger().debug("cuda {} trial {} {} {:.2f} us, {} registers, {} threads, {} blocks", what, key, space.describe(points[i]),
                     seconds * 1e6, k ? k->registers() : -1, k ? k->printed().threads : 0, k ? k->printed().grid : 0);
      if (seconds < best) best = seconds, choice = {k, space.describe(points[i])};
    }
  }
  logger().info("cuda {} '{}' {}: {} {:.1f} us, generated best {:.1f} us ({}; {} schedules tried)", what, env.node.name, key,
                library_name, library_seconds * 1e6, best * 1e6, choice.config, tried);
  const std::string best_config = choice.config;
  if (!(best < library_seconds)) choice = {};
  if (choice.kernel && !agrees_with_library(env, c, *choice.kernel, library)) {
    logger().warn("cuda {} '{}': the generated {} is faster but its result differs from {}'s; {} runs", what, env.node.name,
                  choice.config, library_name, library_name);
    choice = {};
    best = std::numeric_limits<double>::infinity();
  }
  if (env.choices) (*env.choices)[key] = choice.kernel ? choice.config : "library";
  if (env.records && env.records->store)
    env.records->store("cuda:" + Device::get().info().name + ":" + key, choice.kernel ? choice.config : "library",
                       std::min(best, library_seconds) * 1e6,
                       library_name + " " + std::to_string(library_seconds * 1e6) + " us, generated " +
                           (best_config.empty() ? "none" : best_config) + " " + std::to_string(best * 1e6) + " us");
  return choice;
}

Choice recorded_choice(const PrepareEnv& env, const std::string& key, const GeneratedCandidates& c) {
  if (!env.records || !env.records->lookup) return {};
  const auto recorded = env.records->lookup("cuda:" + Device::get().info().name + ":" + key);
  if (!recorded || *recorded == "library" || *recorded == "cudnn") return {};
  const search::Space space(c.knobs, c.valid);
  const auto point = space.parse(*recorded);
  if (!point || !space.valid(*point)) return {};
  try {
    return {GeneratedKernel::obtain(c.print(space, *point), env.cubins), *recorded};
  } catch (const std::exception& e) {
    logger().warn("cuda {}: the recorded schedule {} could not be had, the library's kernel runs: {}", env.node.name, *recorded,
                  e.what());
    return {};
  }
}

namespace {
struct Answers {
  std::mutex mutex;
  std::map<std::string, int> by_key;
};
Answers& answers() {
  static Answers a;
  return a;
}
}  // namespace

std::optional<int> known_alternative(const std::string& key) {
  Answers& a = answers();
  const std::lock_guard<std::mutex> lock(a.mutex);
  if (auto it = a.by_key.find(key); it != a.by_key.end()) return it->second;
  return std::nullopt;
}

void remember_alternative(const std::string& key, int winner) {
  Answers& a = answers();
  const std::lock_guard<std::mutex> lock(a.mutex);
  a.by_key[key] = winner;
}

int fastest_alternative(const PrepareEnv& env, const std::string& key, const std::string& what, const std::function<void()>& current,
                        const std::vector<Alternative>& alternatives) {
  if (const auto known = known_alternative(key)) return *known;
  const std::vector<CUdeviceptr> out = {env.out.ptr};
  const Tensor want = output_after(env, out, current);
  const double current_seconds = median_launch_seconds(env.handles, current);
  double best = current_seconds;
  int winner = -1;
  std::string timings;
  for (std::size_t i = 0; i < alternatives.size(); ++i) {
    const Alternative& a = alternatives[i];
    try {
      if (!outputs_agree(output_after(env, out, a.launch), want)) {
        timings += ", " + a.name + " disagrees";
        continue;
      }
      const double seconds = median_launch_seconds(env.handles, a.launch);
      timings += fmt::format(", {} {:.1f} us", a.name, seconds * 1e6);
      if (seconds < best) best = seconds, winner = static_cast<int>(i);
    } catch (const Error& e) {
      timings += ", " + a.name + " failed (" + e.what() + ")";
    }
  }
  logger().debug("cuda {} {}: current {:.1f} us{}; {}", what, env.node.name, current_seconds * 1e6, timings,
                 winner < 0 ? std::string("kept") : alternatives[static_cast<std::size_t>(winner)].name + " runs");
  remember_alternative(key, winner);
  return winner;
}

}  // namespace wpk::cuda
