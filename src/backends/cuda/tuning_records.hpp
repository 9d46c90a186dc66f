#pragma once
// Where the CUDA backend's tuning choices (which implementation runs each convolution: cuDNN or a
// generated schedule) are remembered: the session's tuning records, handed to the regions it
// prepares through a scope on the preparing thread. Needs no CUDA header: the session sets it.
#include <functional>
#include <optional>
#include <string>

namespace wpk::cuda {

struct TuningRecords {
  std::function<std::optional<std::string>(const std::string& key)> lookup;
  // The choice, its measured median in microseconds, and a line for people.
  std::function<void(const std::string& key, const std::string& choice, double median_us, const std::string& summary)> store;
};

// While alive, regions prepared on this thread read and write `records` (null: none).
class TuningRecordsScope {
 public:
  explicit TuningRecordsScope(const TuningRecords* records);
  ~TuningRecordsScope();
  TuningRecordsScope(const TuningRecordsScope&) = delete;
  TuningRecordsScope& operator=(const TuningRecordsScope&) = delete;

 private:
  const TuningRecords* previous_;
};

const TuningRecords* current_tuning_records();

}  // namespace wpk::cuda
