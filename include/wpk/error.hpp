#pragma once
// wpk::Error — the one exception type wpk throws. Every failure (bad file, unsupported op,
// wrong input at run()) surfaces as an Error with a code a program can branch on and a message a
// person can act on: it names the node, op and input at fault where there is one.
#include <stdexcept>
#include <string>

// What this header declares is libwpk's API: a shared libwpk exports it (its other symbols are
// hidden).
#pragma GCC visibility push(default)

namespace wpk {

enum class ErrorCode {
  InvalidArgument,  // a caller passed something wrong (input name, shape, dtype, option)
  NotFound,         // a file or a named value does not exist
  InvalidModel,     // the model file is corrupt, truncated, or breaks the ONNX rules
  Unsupported,      // a valid model uses an op, attribute or dtype wpk does not run
  Io,               // reading or writing a file failed
  ResourceExhausted,  // a model or run would cross a limit (rank, elements, memory): see SessionOptions
  Internal,         // a wpk bug: please report it
  Cancelled,        // a run stopped at its deadline or cancel flag (RunOptions)
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace wpk

#pragma GCC visibility pop
