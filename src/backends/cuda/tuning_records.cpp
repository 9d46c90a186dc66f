#include "backends/cuda/tuning_records.hpp"

namespace wpk::cuda {
namespace {
thread_local const TuningRecords* current = nullptr;
}  // namespace

TuningRecordsScope::TuningRecordsScope(const TuningRecords* records) : previous_(current) { current = records; }
TuningRecordsScope::~TuningRecordsScope() { current = previous_; }
const TuningRecords* current_tuning_records() { return current; }

}  // namespace wpk::cuda
