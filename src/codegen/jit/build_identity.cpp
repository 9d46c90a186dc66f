#include "codegen/jit/build_identity.hpp"

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstring>

namespace wpk::codegen {
namespace {

struct Search {
  std::uintptr_t address = 0;  // an address inside the binary sought
  std::string id;
  bool found = false;
};

bool holds(const dl_phdr_info& info, std::uintptr_t address) {
  for (int i = 0; i < info.dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info.dlpi_phdr[i];
    const std::uintptr_t start = info.dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && address >= start && address - start < ph.p_memsz) return true;
  }
  return false;
}

// The NT_GNU_BUILD_ID note among the binary's PT_NOTE segments (each a run of notes: a header,
// the owner's name and the description, both padded to 4 bytes).
std::string build_id_note(const dl_phdr_info& info) {
  for (int i = 0; i < info.dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info.dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const auto* p = reinterpret_cast<const unsigned char*>(info.dlpi_addr + ph.p_vaddr);
    const unsigned char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) note;
      std::memcpy(&note, p, sizeof note);
      const unsigned char* name = p + sizeof note;
      const unsigned char* desc = name + ((note.n_namesz + 3u) & ~3u);
      const unsigned char* next = desc + ((note.n_descsz + 3u) & ~3u);
      if (next > end || next <= p) break;
      if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        static const char kHex[] = "0123456789abcdef";
        std::string hex;
        for (std::uint32_t b = 0; b < note.n_descsz; ++b) {
          hex += kHex[desc[b] >> 4];
          hex += kHex[desc[b] & 15];
        }
        return hex;
      }
      p = next;
    }
  }
  return "";
}

int visit(dl_phdr_info* info, std::size_t, void* data) {
  auto* search = static_cast<Search*>(data);
  if (!holds(*info, search->address)) return 0;
  search->id = build_id_note(*info);
  search->found = true;
  return 1;
}

}  // namespace

const std::string& build_identity() {
  static const std::string id = [] {
    Search search;
    search.address = reinterpret_cast<std::uintptr_t>(&build_identity);
    dl_iterate_phdr(visit, &search);
    return search.id;
  }();
  return id;
}

}  // namespace wpk::codegen
