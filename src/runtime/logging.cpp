#include "runtime/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <string>

namespace wpk {
namespace {

spdlog::level::level_enum to_spdlog(LogLevel l) {
  switch (l) {
    case LogLevel::Trace: return spdlog::level::trace;
    case LogLevel::Debug: return spdlog::level::debug;
    case LogLevel::Info: return spdlog::level::info;
    case LogLevel::Warn: return spdlog::level::warn;
    case LogLevel::Error: return spdlog::level::err;
    case LogLevel::Off: return spdlog::level::off;
  }
  return spdlog::level::warn;
}

spdlog::level::level_enum env_level() {
  const char* v = std::getenv("WPK_LOG_LEVEL");
  if (!v || !*v) return spdlog::level::warn;
  const auto l = spdlog::level::from_str(v);  // unknown names map to off; keep warn instead
  return (l == spdlog::level::off && std::string(v) != "off") ? spdlog::level::warn : l;
}

}  // namespace

spdlog::logger& logger() {
  // Logs go to stderr so stdout stays clean for `wpk bench --json`.
  static std::shared_ptr<spdlog::logger> log = [] {
    auto l = spdlog::stderr_color_mt("wpk");
    l->set_level(env_level());
    l->set_pattern("[wpk %l] %v");
    return l;
  }();
  return *log;
}

void apply_log_level(const SessionOptions& options) {
  logger().set_level(options.log_level_set ? to_spdlog(options.log_level) : env_level());
}

}  // namespace wpk
