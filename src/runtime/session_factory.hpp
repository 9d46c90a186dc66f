#pragma once
// Sessions over a chosen backend list instead of registered_backends(): for tests of dispatch
// and tuning, which need backends that are slow, wrong or absent in a real build.
#include "backends/kernel.hpp"
#include "wpk/session.hpp"

namespace wpk {

struct SessionFactory {
  static Session create(Graph graph, SessionOptions options, const std::vector<const Backend*>& backends) {
    return Session(std::move(graph), std::move(options), backends);
  }
};

}  // namespace wpk
