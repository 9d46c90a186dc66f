#include "wpk/error.hpp"

#include <new>
#include <stdexcept>

#include "core/api_boundary.hpp"

namespace wpk {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::NotFound: return "not found";
    case ErrorCode::InvalidModel: return "invalid model";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::Io: return "i/o error";
    case ErrorCode::ResourceExhausted: return "resource exhausted";
    case ErrorCode::Internal: return "internal error";
    case ErrorCode::Cancelled: return "cancelled";
  }
  return "error";
}

void rethrow_as_error(const std::string& context) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::ResourceExhausted, context + "out of memory");
  } catch (const std::length_error& e) {
    throw Error(ErrorCode::ResourceExhausted, context + "a size beyond what can be allocated (" + e.what() + ")");
  } catch (const std::exception& e) {
    throw Error(ErrorCode::Internal, context + e.what());
  } catch (...) {
    throw Error(ErrorCode::Internal, context + "unknown exception");
  }
}

}  // namespace wpk
