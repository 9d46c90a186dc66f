#pragma once
// An environment variable set for a scope, then put back as it was (unset if it was unset).
#include <cstdlib>
#include <optional>
#include <string>

namespace wpk::testing {

class EnvOverride {
 public:
  EnvOverride(const char* name, const std::string& value) : name_(name) {
    if (const char* was = std::getenv(name)) was_ = was;
    ::setenv(name, value.c_str(), 1);
  }
  ~EnvOverride() {
    if (was_) ::setenv(name_, was_->c_str(), 1);
    else ::unsetenv(name_);
  }
  EnvOverride(const EnvOverride&) = delete;
  EnvOverride& operator=(const EnvOverride&) = delete;

 private:
  const char* name_;
  std::optional<std::string> was_;
};

}  // namespace wpk::testing
