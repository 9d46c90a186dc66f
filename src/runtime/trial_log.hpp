#pragma once
// What a node's search measured, stored beside its tuning record (under the record's key plus
// ";trials") so that a search the deadline cut short resumes from it and the cost model is
// calibrated from it (cost_calibration.hpp). Text, one value of the tuning database:
//
//   trials:<candidate identity>|<threads>|<measured us>|<predicted us>;...
//
// Identities hold no '|' or ';'. Reading skips malformed items (a damaged or foreign value).
#include <string>
#include <vector>

namespace wpk {

struct LoggedTrial {
  std::string identity;  // Candidate::identity(): "cpu(kernel=stream_avx512,block=64)"
  int threads = 0;
  double us = 0;            // measured median; +inf for a failed or rejected configuration
  double predicted_us = 0;  // the cost model's figure (nominal machine) where its backend describes
                            // it (Backend::describe), else 0
  // The described kernel's name (KernelProfile::name), "" where it has none: one config string
  // names a product's kernel and a conv's alike, and they stray from the model differently.
  std::string kernel;
};

constexpr const char* kTrialLogPrefix = "trials:";
// The key of this environment's cost-model calibration, derived from all its trial logs
// (cost_calibration.hpp).
std::string calibration_record_key();

std::string encode_trial_log(const std::vector<LoggedTrial>& trials);
std::vector<LoggedTrial> decode_trial_log(const std::string& text);

}  // namespace wpk
