#pragma once
// Which version of a file is on disk now, for caches of what was derived from it (a checksum, a
// parse, a probe): its device, inode, size and modification time. A file replaced by a rename is
// another inode, so a rewrite is always a new version.
#include <string>

namespace wpk::codegen {

// "device:inode:size:seconds.nanoseconds"; "" when the file cannot be examined.
std::string file_version(const std::string& path);

}  // namespace wpk::codegen
