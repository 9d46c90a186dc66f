#pragma once
// No standard exception leaves wpk's API: inside a catch block, rethrow_as_error() turns what is
// being handled into a wpk::Error (std::bad_alloc and std::length_error: ResourceExhausted;
// anything else: Internal) with `context` in front, and rethrows a wpk::Error unchanged.
#include <string>

namespace wpk {

[[noreturn]] void rethrow_as_error(const std::string& context = "");

}  // namespace wpk
