#pragma once
// Sessions over a chosen backend list instead of registered_backends(): for tests of dispatch
// and tuning, which need backends that are slow, wrong or absent in a real build; and the
// runtime's own way into a session's runs.
#include "backends/kernel.hpp"
#include "wpk/session.hpp"

namespace wpk {

struct SessionFactory {
  static Session create(Graph graph, SessionOptions options, const std::vector<const Backend*>& backends) {
    return Session(std::move(graph), std::move(options), backends);
  }
  // Session::run without the names: inputs in the order of inputs(), outputs in the order of
  // outputs() (control-flow bodies, at every iteration).
  static std::vector<Tensor> run_in_order(const Session& s, const std::vector<Tensor>& inputs) { return s.run_in_order(inputs); }
};

}  // namespace wpk
