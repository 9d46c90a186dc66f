#include "runtime/tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "runtime/cache_key.hpp"
#include "runtime/candidate_cost.hpp"
#include "runtime/cost_calibration.hpp"
#include "runtime/logging.hpp"
#include "runtime/measurement.hpp"
#include "runtime/memory_recorder.hpp"
#include "runtime/threads.hpp"
#include "runtime/trial_log.hpp"
#include "runtime/workload.hpp"

namespace wpk {
namespace {

std::atomic<std::uint64_t> g_measurements{0};

// The analytic cost model over a node's {candidate, threads} space: what GA and RL rank their
// candidates by before measuring any.
class StepCostModel : public search::CostModel {
 public:
  StepCostModel(const PlanStep& step, const Node& node, const Graph& graph, InputShapes shapes,
                const CostCalibration* calibration)
      : step_(step), node_(node), graph_(graph), shapes_(std::move(shapes)), calibration_(calibration) {}
  double predict(const search::Space& space, const search::Point& p) const override {
    const Candidate& c = step_.candidates[static_cast<std::size_t>(space.value(p, 0))];
    return predicted_seconds(*c.backend, c.config, node_, graph_, shapes_, static_cast<int>(space.value(p, 1)),
                             c.prepared(), calibration_);
  }
  // A trial at `p` as logged: its measurement, the prediction without calibration (so calibration
  // never feeds on itself) and the described kernel's name, only where the backend describes the
  // candidate (Backend::describe): a generic profile models nothing worth correcting (0 and "").
  LoggedTrial logged(const search::Space& space, const search::Point& p, double us) const {
    const Candidate& c = step_.candidates[static_cast<std::size_t>(space.value(p, 0))];
    const int threads = static_cast<int>(space.value(p, 1));
    const std::optional<KernelProfile> k = c.backend->describe(node_, graph_, c.config, shapes_, threads);
    return {c.identity(), threads, us, k ? 1e6 * predicted_seconds(*k, c.identity(), node_, shapes_, threads) : 0.0,
            k ? k->name : std::string()};
  }

 private:
  const PlanStep& step_;
  const Node& node_;
  const Graph& graph_;
  InputShapes shapes_;
  const CostCalibration* calibration_;
};

// The key of a node's trial log (trial_log.hpp), beside its record's key.
constexpr const char* kTrialsKeySuffix = ";trials";

// The kernel family of a candidate, for the search's first trials: its backend and the described
// kernel's name up to "__" (every tile of the generated conv is one family), or, where the backend
// names no kernel, its config's first knob (oneDNN's algorithm).
std::string candidate_family(const Candidate& c, const Node& node, const Graph& graph, const InputShapes& shapes,
                             int threads) {
  const std::optional<KernelProfile> k = c.backend->describe(node, graph, c.config, shapes, threads);
  const std::string name = k && !k->name.empty() ? k->name.substr(0, k->name.find("__")) : c.config.substr(0, c.config.find(','));
  return c.backend->name() + ":" + name;
}

double seconds_until(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(t - std::chrono::steady_clock::now()).count();
}

}  // namespace

std::uint64_t tuning_measurements() { return g_measurements.load(); }

std::string record_value(const std::string& backend, int threads) {
  return threads > 0 ? backend + ";threads=" + std::to_string(threads) : backend;
}

std::pair<std::string, int> parse_record_value(const std::string& value) {
  const std::size_t semi = value.find(";threads=");
  if (semi == std::string::npos) return {value, 0};
  try {
    return {value.substr(0, semi), std::stoi(value.substr(semi + 9))};
  } catch (const std::exception&) {
    return {value.substr(0, semi), 0};
  }
}

namespace {

// The next fastest configurations measured alone after the winner, faster than the untuned one
// by as much as a winner must be (kMinGain): what the in-model check tries where the winner loses
// inside the model. One only as fast as the untuned choice would be kept or not by noise.
std::pair<std::vector<StepChoice>, std::vector<double>> runners_up(const search::Space& space,
                                                                   const std::vector<search::Trial>& history,
                                                                   const search::SearchResult& result,
                                                                   const search::Point& untuned, double untuned_us) {
  std::vector<search::Trial> all(history.begin() + 1, history.end());
  all.insert(all.end(), result.trials.begin(), result.trials.end());
  std::sort(all.begin(), all.end(), [](const search::Trial& a, const search::Trial& b) { return a.cost < b.cost; });
  std::pair<std::vector<StepChoice>, std::vector<double>> out;
  std::vector<search::Point> seen = {result.best, untuned};
  for (const search::Trial& t : all) {
    if (out.first.size() == Tuner::kRunnersUp || !(t.cost < untuned_us * kMinGain)) break;
    if (std::find(seen.begin(), seen.end(), t.point) != seen.end()) continue;
    seen.push_back(t.point);
    out.first.push_back({static_cast<int>(space.value(t.point, 0)), static_cast<int>(space.value(t.point, 1))});
    out.second.push_back(t.cost);
  }
  return out;
}

}  // namespace

Tuner::Tuner(const Graph& graph, const ExecutionPlan& plan, TuningDb* db, int threads, TuningSettings settings,
             const CostCalibration* calibration)
    : graph_(graph), plan_(plan), db_(db), threads_(threads), settings_(std::move(settings)), calibration_(calibration),
      sweep_bytes_(0), tuned_(plan.steps().size(), false), chosen_(plan.steps().size()) {
  std::size_t constant_bytes = 0;
  for (const auto& kv : graph.initializers()) constant_bytes += kv.second.nbytes();
  sweep_bytes_ = sweep_bytes_for_constants(constant_bytes);
}

CacheState Tuner::cache_state(const Node& node, const std::vector<const Tensor*>& inputs) const {
  CacheState cache;
  cache.sweep_bytes = sweep_bytes_;
  if (sweep_bytes_ == 0) return cache;
  for (std::size_t i = 0; i < inputs.size() && i < node.inputs.size(); ++i) {
    const ValueId v = node.inputs[i];
    if (v != kNoValue && !graph_.is_initializer(v) && !plan_.is_released(v)) cache.activations.push_back(inputs[i]);
  }
  return cache;
}

int Tuner::residual_in_place(std::size_t s, const Node& node, const Candidate& c) const {
  // The memory plan's own rule; its element-wise ops are left as they were measured.
  const InPlaceRule rule = in_place_rule(node, *c.backend, c.config);
  if (rule.elementwise || rule.inputs.size() != 1 || rule.inputs[0] >= node.inputs.size()) return -1;
  const ValueId v = node.inputs[rule.inputs[0]];
  const auto& graph_inputs = graph_.inputs();
  if (v == kNoValue || graph_.is_initializer(v) || plan_.is_graph_output(v) ||
      std::find(graph_inputs.begin(), graph_inputs.end(), v) != graph_inputs.end() ||
      plan_.last_reader(v) != static_cast<int>(s))
    return -1;
  return static_cast<int>(rule.inputs[0]);
}

void Tuner::mark_tuned(std::size_t step) const {
  std::lock_guard<std::mutex> lock(report_mutex_);
  tuned_[step] = true;
}

int Tuner::tuned_nodes() const {
  std::lock_guard<std::mutex> lock(report_mutex_);
  return static_cast<int>(std::count(tuned_.begin(), tuned_.end(), true));
}

std::string tuning_key(const std::string& signature, int threads, const std::string& offered) {
  return signature + ";threads=" + std::to_string(threads) + ";backends=" + offered + ";" + environment_key();
}

std::string declared_tuning_key(const Node& node, const Graph& graph, int threads, const std::string& offered) {
  return tuning_key(op_signature(node, graph, declared_input_descs(node, graph)), threads, offered);
}

std::string node_choices_key(const std::string& fingerprint, const Node& node, const std::string& offered) {
  return "choices;model=" + fingerprint + ";node=" + node.name + ";backends=" + offered + ";" + environment_key();
}

// An identity holds no ';' (record_value separates the threads with one).
std::vector<std::string> parse_node_choices(const std::string& value) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < value.size()) {
    const std::size_t end = std::min(value.find(';', at), value.size());
    if (end > at) out.push_back(value.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

std::string add_node_choice(const std::string& value, const std::string& identity) {
  std::vector<std::string> choices = parse_node_choices(value);
  choices.erase(std::remove(choices.begin(), choices.end(), identity), choices.end());
  choices.push_back(identity);
  if (choices.size() > kNodeChoicesKept) choices.erase(choices.begin(), choices.end() - kNodeChoicesKept);
  std::string out;
  for (const std::string& c : choices) out += c + ";";
  return out;
}

void Tuner::store_record(const PlanStep& step, const Node& node, const std::string& key, const std::string& identity,
                         int threads, double us, const std::string& summary) const {
  if (!db_) return;
  db_->store(key, record_value(identity, threads), us, summary);
  list_choice(step, node, identity);
}

void Tuner::list_choice(const PlanStep& step, const Node& node, const std::string& identity) const {
  if (!db_ || !settings_.lists_choices) return;
  const std::string list_key = node_choices_key(settings_.model_fingerprint, node, step.offered);
  const std::string list = db_->lookup(list_key).value_or("");
  const std::string updated = add_node_choice(list, identity);
  if (updated != list) db_->store(list_key, updated, 0, "what " + node.name + "'s records name");
}

std::string Tuner::key_for(const PlanStep& step, const Node& node, const std::vector<const Tensor*>& inputs) const {
  // A constant the kernels own packed copies of comes as no tensor: described as declared.
  const InputShapes shapes = run_input_shapes(node, graph_, inputs);
  std::vector<std::optional<InputDesc>> descs;
  for (std::size_t i = 0; i < node.inputs.size(); ++i) {
    const ValueId v = node.inputs[i];
    const bool constant = v != kNoValue && (graph_.is_initializer(v) || plan_.is_released(v));
    const Tensor* t = i < inputs.size() ? inputs[i] : nullptr;
    if (t) descs.push_back(InputDesc{t->dtype(), t->shape(), constant});
    else if (constant && shapes[i]) descs.push_back(InputDesc{graph_.value(v).dtype, *shapes[i], true});
    else descs.push_back(std::nullopt);
  }
  return tuning_key(op_signature(node, graph_, descs), threads_, step.offered);
}

std::string Tuner::describe(const PlanStep& step, StepChoice c) const {
  const Candidate& cand = step.candidates[static_cast<std::size_t>(c.candidate)];
  const Kernel* k = cand.ready();
  const std::string kernel = k ? k->profile().name : "";
  return cand.identity() + (kernel.empty() ? "" : ":" + kernel) + " threads=" + std::to_string(threads_of(c));
}

namespace {

// Whether the candidate runs these inputs, preparing a deferred one to ask it.
bool runs(const Candidate& c, const std::vector<const Tensor*>& inputs) {
  const Kernel* k = c.ready();
  return k && k->runs(inputs);
}

}  // namespace

std::vector<int> Tuner::ranked_thread_counts(const Candidate& c) const {
  if (threads_ > 1 && c.backend->uses_host_threads()) return {threads_, 1};
  return {threads_};
}

StepChoice Tuner::predicted_best(std::size_t s, const std::vector<const Tensor*>& inputs, bool as_untuned_session) const {
  const PlanStep& step = plan_.steps()[s];
  const bool threaded = threads_ > 1 && !step.candidates.empty() && step.candidates[0].backend->uses_host_threads();
  if (step.candidates.size() < 2 && !threaded) return {};
  bool only_generated = true;
  for (const Candidate& c : step.candidates)
    only_generated = only_generated && (c.backend->generates_code() || c.backend->name() == "reference");
  const bool skip_generated = as_untuned_session && !only_generated && !settings_.untuned_compiles_later;
  const Node& node = graph_.nodes()[step.node_index];
  const InputShapes shapes = run_input_shapes(node, graph_, inputs);
  // A deferred candidate is ranked by its description; picked, it is prepared, and one that then
  // cannot be had or does not run these inputs leaves the ranking. Each on all the session's
  // threads and on one: on tiny tensors starting the threads costs more than they save.
  std::vector<bool> out(step.candidates.size(), false);
  const bool tracing = logger().should_log(spdlog::level::trace);
  for (;;) {
    std::string ranked;
    StepChoice best{-1, 0};
    double best_seconds = 0;
    for (std::size_t c = 0; c < step.candidates.size(); ++c) {
      const Candidate& cand = step.candidates[c];
      if (out[c] || cand.awaiting() || (cand.kernel && !cand.kernel->runs(inputs)) ||
          (skip_generated && cand.backend->generates_code()))
        continue;
      for (const int t : ranked_thread_counts(cand)) {
        const double seconds =
            predicted_seconds(*cand.backend, cand.config, node, graph_, shapes, t, cand.prepared(),
                              as_untuned_session ? nullptr : calibration_);
        if (tracing) ranked += fmt::format("{}{}@{} {:.3g}", ranked.empty() ? "" : ", ", cand.identity(), t, seconds);
        if (best.candidate < 0 || seconds < best_seconds) {  // ties: the earlier registered backend, all threads
          best = {static_cast<int>(c), t == threads_ ? 0 : t};
          best_seconds = seconds;
        }
      }
    }
    if (best.candidate < 0) return {};
    if (tracing) logger().trace("{}at these shapes{} ranked {}", node_label(node), as_untuned_session ? ", untuned," : "", ranked);
    if (runs(step.candidates[static_cast<std::size_t>(best.candidate)], inputs)) {
      if (!as_untuned_session) want_code_if_first(s, shapes, best_seconds);
      return best;
    }
    out[static_cast<std::size_t>(best.candidate)] = true;
  }
}

void Tuner::want_code_if_first(std::size_t s, const InputShapes& shapes, double best_seconds) const {
  if (!settings_.on_code_wanted) return;
  const PlanStep& step = plan_.steps()[s];
  const Node& node = graph_.nodes()[step.node_index];
  for (std::size_t c = 0; c < step.candidates.size(); ++c) {
    const Candidate& cand = step.candidates[c];
    if (!cand.waits_to_be_wanted()) continue;
    for (const int t : ranked_thread_counts(cand))
      if (predicted_seconds(*cand.backend, cand.config, node, graph_, shapes, t, cand.prepared(), calibration_) < best_seconds) {
        settings_.on_code_wanted(s, c);
        break;
      }
  }
}

void Tuner::start_measuring(std::chrono::steady_clock::time_point deadline) {
  deadline_ = deadline;
  int total = 0;
  for (const PlanStep& step : plan_.steps())
    total += step.candidates.size() > 1 ||
             (threads_ > 1 && !step.candidates.empty() && step.candidates[0].backend->uses_host_threads());
  std::lock_guard<std::mutex> lock(report_mutex_);
  progress_ = TuningProgress{0, total, 0, 1.0, seconds_until(deadline)};
  measuring_ = true;
}

void Tuner::stop_measuring() { measuring_ = false; }

std::vector<TunedNode> Tuner::report() const {
  std::lock_guard<std::mutex> lock(report_mutex_);
  return report_;
}

void Tuner::progress(std::size_t trials, double speedup) const {
  TuningProgress p;
  {
    std::lock_guard<std::mutex> lock(report_mutex_);
    progress_.trials += trials;
    progress_.best_speedup = std::max(progress_.best_speedup, speedup);
    progress_.seconds_left = std::max(0.0, seconds_until(deadline_));
    p = progress_;
  }
  if (settings_.on_progress) settings_.on_progress(p);
}

StepChoice Tuner::choose(std::size_t s, const std::vector<const Tensor*>& inputs) const {
  const PlanStep& step = plan_.steps()[s];
  const bool threads_matter = threads_ > 1 && !step.candidates.empty() && step.candidates[0].backend->uses_host_threads();
  if ((step.candidates.size() < 2 && !threads_matter) || (!db_ && !measuring_)) return predicted_best(s, inputs);
  const Node& node = graph_.nodes()[step.node_index];
  const std::string key = key_for(step, node, inputs);
  if (auto value = db_ ? db_->lookup(key) : std::nullopt) {
    const auto [backend, threads] = parse_record_value(*value);
    for (std::size_t c = 0; c < step.candidates.size(); ++c)
      if (step.candidates[c].identity() == backend && runs(step.candidates[c], inputs)) {
        mark_tuned(s);
        if (measuring_) {
          list_choice(step, node, backend);  // a folder tuned before the lists were kept gets them
          const StepChoice untuned = predicted_best(s, inputs, true);
          std::lock_guard<std::mutex> lock(report_mutex_);
          ++progress_.nodes_done;
          chosen_[s] = Chosen{untuned, key, op_summary(node, inputs), {}, {}};
        }
        return {static_cast<int>(c), std::clamp(threads, 0, threads_)};
      }
    // A record for sizes the plan did not prepare its winner for (other than the declared ones,
    // without fixed_dims): the cost model picks among what was prepared.
    logger().debug("{}the tuning record's {} is not prepared here or declines these shapes",
                   node_label(graph_.nodes()[step.node_index]), backend);
  }
  // After the record: ranking may prepare a deferred candidate, which a record makes needless.
  if (!measuring_ || seconds_until(deadline_) <= 0) return predicted_best(s, inputs);
  // The search starts from, and its winner must beat, what the node runs on without tuning.
  return search_node(s, inputs, key, predicted_best(s, inputs, true));
}

std::vector<Tuner::Change> Tuner::changes(const std::vector<StepChoice>& chosen) const {
  std::lock_guard<std::mutex> lock(report_mutex_);
  std::vector<Change> out;
  for (std::size_t s = 0; s < chosen.size() && s < chosen_.size(); ++s) {
    if (!chosen_[s]) continue;
    const StepChoice u = chosen_[s]->untuned;
    if (u.candidate != chosen[s].candidate || threads_of(u) != threads_of(chosen[s]))
      out.push_back({s, u, chosen_[s]->key, chosen_[s]->runners_up});
  }
  return out;
}

void Tuner::settle(const std::vector<Change>& changes, const std::vector<StepChoice>& choices,
                   const std::vector<double>& us) const {
  // One store per record (steps sharing a record settle together), outside the report's lock.
  std::map<std::string, std::pair<std::string, double>> records;  // key -> (value, us)
  std::map<std::string, std::string> summaries;
  std::vector<std::pair<std::size_t, std::string>> listed;  // (step, identity): every node's list
  {
    std::lock_guard<std::mutex> lock(report_mutex_);
    for (std::size_t i = 0; i < changes.size() && i < choices.size(); ++i) {
      const Change& c = changes[i];
      const StepChoice choice = choices[i];
      const PlanStep& step = plan_.steps()[c.step];
      const Node& node = graph_.nodes()[step.node_index];
      const bool untuned = choice == c.untuned;
      for (TunedNode& row : report_)
        if (row.node == node.name) {
          row.slower_in_model = untuned;
          row.runner_up_in_model = !untuned;
          if (untuned || !chosen_[c.step]) continue;
          row.winner = describe(step, choice);
          const auto& next = chosen_[c.step]->runners_up;
          for (std::size_t k = 0; k < next.size(); ++k)
            if (next[k] == choice)
              row.winner_us = chosen_[c.step]->runners_up_us[k];
        }
      const std::string identity = step.candidates[static_cast<std::size_t>(choice.candidate)].identity();
      // As the plan has it: threads 0 (all) stays 0.
      records.emplace(c.key, std::make_pair(record_value(identity, choice.threads), i < us.size() ? us[i] : 0));
      summaries.emplace(c.key, chosen_[c.step] ? chosen_[c.step]->summary : node.op_type);
      listed.emplace_back(c.step, identity);
    }
  }
  if (!db_) return;
  for (const auto& [key, value] : records) db_->store(key, value.first, value.second, summaries[key]);
  for (const auto& [s, identity] : listed) {
    const PlanStep& step = plan_.steps()[s];
    list_choice(step, graph_.nodes()[step.node_index], identity);
  }
}

std::vector<int> tuning_thread_counts(int threads) {
  std::vector<int> counts;
  for (int t = 1; t < threads; t *= 2) counts.push_back(t);
  counts.push_back(std::max(1, threads));
  return counts;
}

std::vector<TunedNode::StrategyRun> Tuner::replay_strategies(const search::Space& space, const search::CostModel& model,
                                                             const std::vector<search::Trial>& measured,
                                                             std::size_t step) const {
  // The untuned point (the last measured) is every strategy's first trial, as in a real search.
  const search::Trial& untuned = measured.back();
  const std::size_t budget = std::max<std::size_t>(
      1, static_cast<std::size_t>(std::floor(TuningSettings::kCompareTrialShare * static_cast<double>(measured.size()))));
  const auto cost_of = [&](const search::Point& p) {
    for (const search::Trial& t : measured)
      if (t.point == p) return t.cost;
    return std::numeric_limits<double>::infinity();  // not measured: an invalid point
  };
  std::vector<TunedNode::StrategyRun> runs;
  for (search::Algorithm a : {search::Algorithm::Random, search::Algorithm::Genetic, search::Algorithm::Rl})
    for (int k = 0; k < TuningSettings::kCompareSeeds; ++k) {
      const std::uint64_t seed = settings_.seed + step * TuningSettings::kCompareSeeds + static_cast<std::uint64_t>(k);
      const auto strategy = search::make_strategy(a, space, seed, &model);
      const search::SearchResult r = search::run_search(*strategy, cost_of, search::Budget{budget - 1}, {untuned});
      runs.push_back({search::algorithm_name(a), seed, budget, std::min(r.best_cost, untuned.cost)});
    }
  return runs;
}

bool Tuner::confirmed(std::size_t s, const Node& node, const std::vector<const Tensor*>& inputs, StepChoice winner,
                      StepChoice untuned, double& winner_us, double& untuned_us) const {
  // Measured again, alternately, twice each: a winner found on one noisy series (another
  // process taking a core for a while) must not be stored as the node's tuning.
  const PlanStep& step = plan_.steps()[s];
  const Kernel* winner_kernel = step.candidates[static_cast<std::size_t>(winner.candidate)].ready();
  const Kernel* untuned_kernel = step.candidates[static_cast<std::size_t>(untuned.candidate)].ready();
  if (!winner_kernel || !untuned_kernel) return false;
  const Kernel& w = *winner_kernel;
  const Kernel& u = *untuned_kernel;
  std::vector<Tensor> scratch_w, scratch_u;
  const CacheState cache = cache_state(node, inputs);
  winner_us = untuned_us = std::numeric_limits<double>::infinity();
  try {
    const auto in_place = [&](StepChoice c) {
      return residual_in_place(s, node, step.candidates[static_cast<std::size_t>(c.candidate)]);
    };
    const int u_in_place = in_place(untuned), w_in_place = in_place(winner);
    for (int round = 0; round < 2; ++round) {
      untuned_us = std::min(untuned_us, time_config(u, node, inputs, threads_of(untuned), scratch_u, cache, u_in_place));
      winner_us = std::min(winner_us, time_config(w, node, inputs, winner.threads, scratch_w, cache, w_in_place));
    }
  } catch (const std::exception&) {
    return false;
  }
  return winner_us < untuned_us * kMinGain;
}

StepChoice Tuner::search_node(std::size_t s, const std::vector<const Tensor*>& inputs, const std::string& key,
                              StepChoice untuned) const {
  const PlanStep& step = plan_.steps()[s];
  const Node& node = graph_.nodes()[step.node_index];
  std::vector<std::int64_t> runnable, threads;
  for (std::size_t c = 0; c < step.candidates.size(); ++c)
    if (runs(step.candidates[c], inputs)) runnable.push_back(static_cast<std::int64_t>(c));
  for (int t : tuning_thread_counts(threads_)) threads.push_back(t);
  if (runnable.empty()) return untuned;
  const search::Space space({{"candidate", runnable}, {"threads", threads}});

  // The oracle: the reference backend's result, else the untuned choice's.
  std::size_t ref = static_cast<std::size_t>(untuned.candidate);
  for (std::size_t c = 0; c < step.candidates.size(); ++c)
    if (step.candidates[c].backend->name() == "reference") ref = c;
  std::vector<Tensor> want;
  try {
    const Kernel* oracle = step.candidates[ref].ready();
    if (!oracle) throw Error(ErrorCode::Unsupported, "it could not be prepared");
    time_once(*oracle, node, inputs, threads_, want);
  } catch (const std::exception& e) {
    logger().debug("{}tuning: the oracle {} failed: {}", node_label(node), step.candidates[ref].backend->name(), e.what());
    return untuned;
  }
  const CacheState cache = cache_state(node, inputs);
  auto measure = [&](const search::Point& p) {
    const auto c = static_cast<std::size_t>(space.value(p, 0));
    const int t = static_cast<int>(space.value(p, 1));
    g_measurements.fetch_add(1);
    double us = std::numeric_limits<double>::infinity();
    try {
      std::vector<Tensor> got;
      us = time_config(*step.candidates[c].ready(), node, inputs, t, got, cache,
                       residual_in_place(s, node, step.candidates[c]));
      if (c != ref && !all_agree(node, got, want)) {
        logger().debug("{}tuning: {} rejected, its result differs from {}", node_label(node), step.candidates[c].backend->name(),
                       step.candidates[ref].backend->name());
        us = std::numeric_limits<double>::infinity();
      }
    } catch (const std::exception& e) {
      logger().debug("{}tuning: {} failed: {}", node_label(node), step.candidates[c].backend->name(), e.what());
    }
    progress(1, 1.0);
    return us;
  };

  const auto at = [&](std::int64_t value, const std::vector<std::int64_t>& values) {
    return static_cast<int>(std::find(values.begin(), values.end(), value) - values.begin());
  };
  // The untuned choice runs on all the session's threads (the last of the counts tried) or, where
  // the cost model says the threads cost more than they save, on one (the first).
  const search::Point untuned_point = {at(untuned.candidate, runnable), at(threads_of(untuned), threads)};
  const double untuned_us = measure(untuned_point);
  const std::size_t wanted =
      settings_.compare_strategies
          ? space.size()
          : std::min<std::uint64_t>(space.size(),
                                    settings_.trials_per_node ? settings_.trials_per_node : TuningSettings::kDefaultTrials);
  const InputShapes shapes = run_input_shapes(node, graph_, inputs);
  const StepCostModel model(step, node, graph_, shapes, calibration_);
  // Trials an earlier search of this node measured before its deadline cut it short: this one
  // goes on from them instead of measuring them again.
  const auto to_log = [&](const search::Trial& t) { return model.logged(space, t.point, t.cost); };
  std::vector<search::Trial> history = {{untuned_point, untuned_us}};
  std::vector<LoggedTrial> log = {to_log(history.front())};
  if (db_)
    if (const auto earlier = db_->lookup(key + kTrialsKeySuffix))
      for (const LoggedTrial& t : decode_trial_log(*earlier)) {
        search::Point p = {-1, -1};
        for (std::size_t v = 0; v < space.knobs()[0].values.size(); ++v)
          if (step.candidates[static_cast<std::size_t>(space.knobs()[0].values[v])].identity() == t.identity)
            p[0] = static_cast<int>(v);
        for (std::size_t v = 0; v < space.knobs()[1].values.size(); ++v)
          if (space.knobs()[1].values[v] == t.threads) p[1] = static_cast<int>(v);
        if (p[0] < 0 || p[1] < 0 || p == untuned_point) continue;
        history.push_back({p, t.us});
        log.push_back(t);
      }
  // Each kernel family's best-predicted config on all the threads is measured before the search
  // proper, within the node's budget: a calibration that misjudges one algorithm (Winograd
  // against direct) must not keep the search from ever trying it. The reference is the oracle.
  std::size_t family_trials = 0;
  if (!settings_.compare_strategies) {
    const int all_threads = static_cast<int>(threads.size()) - 1;
    const auto family_of = [&](const search::Point& p) {
      return candidate_family(step.candidates[static_cast<std::size_t>(space.value(p, 0))], node, graph_, shapes,
                              static_cast<int>(space.value(p, 1)));
    };
    std::set<std::string> covered;
    for (const search::Trial& t : history) covered.insert(family_of(t.point));
    std::map<std::string, std::pair<double, search::Point>> leaders;
    for (std::size_t v = 0; v < runnable.size(); ++v) {
      if (step.candidates[static_cast<std::size_t>(runnable[v])].backend->name() == "reference") continue;
      const search::Point p = {static_cast<int>(v), all_threads};
      const std::string family = family_of(p);
      if (covered.count(family)) continue;
      const double predicted = model.predict(space, p);
      const auto found = leaders.find(family);
      if (found == leaders.end() || predicted < found->second.first) leaders[family] = {predicted, p};
    }
    for (const auto& [family, leader] : leaders) {
      if (history.size() >= wanted || seconds_until(deadline_) <= 0) break;
      history.push_back({leader.second, measure(leader.second)});
      log.push_back(to_log(history.back()));
      ++family_trials;
    }
  }
  const std::size_t done = history.size();
  const auto strategy = search::make_strategy(settings_.algorithm, space, settings_.seed + s, &model);
  const search::SearchResult result = search::run_search(
      *strategy, measure, search::Budget{wanted > done ? wanted - done : 0, seconds_until(deadline_)}, history);
  // Every measurement is logged: the next search of a node the deadline cut short resumes from
  // it, and sessions calibrate the cost model from all of them (cost_calibration.hpp). A cut
  // search is not used: the node keeps the cost model's choice.
  for (const search::Trial& t : result.trials) log.push_back(to_log(t));
  if (db_) {
    db_->store(key + kTrialsKeySuffix, encode_trial_log(log), result.best_cost, op_summary(node, inputs));
    CostCalibration::store(*db_);
  }
  if (result.trials.size() + done < wanted && seconds_until(deadline_) <= 0) return untuned;
  if (result.best.empty()) return untuned;
  logger().debug("{}tuning: {} of {} configurations measured, best {:.1f} us, untuned {:.1f} us", node_label(node),
                 result.trials.size() + family_trials + 1, space.size(), result.best_cost, untuned_us);
  std::vector<TunedNode::StrategyRun> strategies;
  if (settings_.compare_strategies) {
    // Every measurement, resumed ones included; the untuned one last (each replay's start).
    std::vector<search::Trial> measured(history.begin() + 1, history.end());
    measured.insert(measured.end(), result.trials.begin(), result.trials.end());
    measured.push_back({untuned_point, untuned_us});
    strategies = replay_strategies(space, model, measured, s);
  }
  StepChoice winner{static_cast<int>(space.value(result.best, 0)), static_cast<int>(space.value(result.best, 1))};
  double winner_us = result.best_cost;
  double baseline_us = untuned_us;
  if (result.best != untuned_point && !confirmed(s, node, inputs, winner, untuned, winner_us, baseline_us)) {
    winner = {untuned.candidate, threads_of(untuned)};
    winner_us = baseline_us;
  }
  store_record(step, node, key, step.candidates[static_cast<std::size_t>(winner.candidate)].identity(), winner.threads,
               winner_us, op_summary(node, inputs));
  {
    std::lock_guard<std::mutex> lock(report_mutex_);
    tuned_[s] = true;
    auto [next, next_us] = runners_up(space, history, result, untuned_point, untuned_us);
    chosen_[s] = Chosen{untuned, key, op_summary(node, inputs), std::move(next), std::move(next_us)};
    report_.push_back({node.name, op_summary(node, inputs), describe(step, untuned), describe(step, winner), baseline_us,
                       winner_us, result.trials.size() + family_trials + 1, std::move(strategies),
                       settings_.compare_strategies ? std::min(result.best_cost, untuned_us) : 0.0});
    ++progress_.nodes_done;
  }
  progress(0, std::isfinite(baseline_us) ? baseline_us / winner_us : 1.0);
  logger().debug("{}tuning: {} wins ({:.1f} us; untuned {} {:.1f} us)", node_label(node), describe(step, winner), winner_us,
                 describe(step, untuned), baseline_us);
  return winner;
}

}  // namespace wpk
