#pragma once
// Which build of wpk is running: the GNU build ID the linker wrote into the binary that holds
// wpk's code (the executable that links libwpk statically, or libwpk.so). It changes with any
// change to that binary's code, so a fact derived from wpk's own code (a generated kernel's source
// printed from its recipe) can be remembered under it and trusted until wpk is rebuilt.
#include <string>

namespace wpk::codegen {

// Hex digits of the build ID; "" when the binary has none (linked without --build-id): then
// nothing is remembered under it.
const std::string& build_identity();

}  // namespace wpk::codegen
