// libFuzzer target: arbitrary bytes as the tuning-record file of a cache folder (bytes from
// outside: another process, another machine, a disk that lost a write). Opening the database,
// looking a key up and storing one (which merges the file and rewrites it), and calibrating the
// cost model from its trial logs, must never crash, hang or throw: damaged lines are ignored and
// rebuilt. The bytes are also read as a trial log's value, where no checksum guards them.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/cost_calibration.hpp"
#include "runtime/trial_log.hpp"
#include "runtime/tuning_db.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string dir = [] {
    std::string d = "/tmp/wpk_cache_fuzz_" + std::to_string(::getpid());
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all("/tmp/wpk_cache_fuzz_" + std::to_string(::getpid()), ec);
    });
    return d;
  }();
  std::filesystem::create_directories(dir);
  const std::string path = wpk::TuningDb(dir).path();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                 static_cast<std::streamsize>(size));
  wpk::TuningDb db(dir);
  (void)db.lookup("op=Conv;shape=[1,3,224,224]");
  db.store("op=Conv;shape=[1,3,224,224]", "onednn", 12.5, "fuzz");
  if (db.lookup("op=Conv;shape=[1,3,224,224]") != std::optional<std::string>("onednn")) __builtin_trap();
  (void)wpk::CostCalibration::from(&db);
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  (void)wpk::decode_trial_log(bytes);
  (void)wpk::decode_trial_log(wpk::kTrialLogPrefix + bytes);
  return 0;
}
