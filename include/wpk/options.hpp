#pragma once
// Plain option structs with sensible defaults: an empty SessionOptions is the right choice for
// most programs.
#include <string>
#include <vector>

namespace wpk {

enum class OptimizationLevel {
  None,   // run the graph exactly as loaded
  Basic,  // semantics-preserving cleanups: constant folding, dead code, Identity/Dropout removal
  All,    // everything wpk knows, including fusions
};

enum class LogLevel { Trace, Debug, Info, Warn, Error, Off };

struct OptimizerOptions {
  OptimizationLevel level = OptimizationLevel::All;
  std::vector<std::string> disabled_passes;  // pass names, as `wpk info --optimized` lists them
};

struct SessionOptions {
  OptimizerOptions optimizer;
  // Threads for kernels; 0 = the cores this process may use.
  int threads = 0;
  // Log level for this session; unset means: WPK_LOG_LEVEL from the environment, else Warn.
  bool log_level_set = false;
  LogLevel log_level = LogLevel::Warn;
};

}  // namespace wpk
