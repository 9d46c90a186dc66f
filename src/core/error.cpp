#include "wpk/error.hpp"

namespace wpk {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::NotFound: return "not found";
    case ErrorCode::InvalidModel: return "invalid model";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::Io: return "i/o error";
    case ErrorCode::Internal: return "internal error";
  }
  return "error";
}

}  // namespace wpk
