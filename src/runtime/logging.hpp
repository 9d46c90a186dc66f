#pragma once
// wpk's logger: spdlog, silent at the default level (warn) on success. WPK_LOG_LEVEL
// (trace|debug|info|warn|error|off) sets the level; SessionOptions may override it.
#include <spdlog/spdlog.h>

#include "wpk/options.hpp"

namespace wpk {

spdlog::logger& logger();
// Applies the session's level when it set one; otherwise the environment's.
void apply_log_level(const SessionOptions& options);

}  // namespace wpk
