#pragma once
// The host C++ compiler that turns generated source into shared objects. Which one: the command
// in WPK_CXX (words separated by spaces, e.g. "ccache g++-12"), else the compiler wpk was built
// with. Compiles run as child processes, several at once, each with a time limit, so a compiler
// that hangs or dies costs its kernels and nothing else.
#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace wpk::codegen {

struct HostCompiler {
  std::vector<std::string> command;  // argv[0] and any leading words
  std::string identity;              // the first line `command --version` prints; "" when it would not run
  std::string why_unusable;          // set when identity is ""
  bool usable() const { return !identity.empty(); }
  std::string describe() const;      // the command as one string
};

// WPK_CXX when set (and not empty), else the build's compiler. Probed once per distinct command
// in a process (running `--version` takes milliseconds).
HostCompiler find_host_compiler();
HostCompiler probe_host_compiler(const std::string& command_line);
// As find_host_compiler, remembering the identity across processes in `folder` (a kernel store's):
// a file per command whose every word is an executable file, keyed by those files' paths,
// inodes, sizes and modification times, so a warm load runs no compiler while the compiler's
// files stay as they were. Any other command, or a folder that cannot be written, is probed.
HostCompiler find_host_compiler(const std::string& folder);

// Flags every kernel is compiled with, before the kernel's own ISA flags.
const std::vector<std::string>& base_compile_flags();

struct CompileJob {
  std::string source_path;          // a C++ file
  std::string output_path;          // the shared object to write
  std::vector<std::string> flags;   // ISA and the like, after base_compile_flags()
  // The compiler's TMPDIR ("" keeps the process's): a compiler killed mid-way cannot remove its
  // temporary files, so they belong in a folder its caller removes.
  std::string scratch_dir;
};

struct CompileOutcome {
  bool ok = false;
  std::string log;                  // the compiler's output (its last 4 KB), or why it did not run
  bool stopped = false;             // not compiled because the batch was stopped (CompileStop)
};

// When a batch of compiles ends early: once `cancel` (may be null) turns true, or at `deadline`
// (unset: none), whichever comes first.
struct CompileStop {
  const std::atomic<bool>* cancel = nullptr;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  bool due() const;
};

// Runs the jobs, at most `parallel` compilers at a time; each is killed after `timeout_seconds`.
// Once `stop` is due, the running compilers are killed and no other starts: their jobs fail,
// marked `stopped`. Returns one outcome per job, in order. Never throws for a compiler's failure.
std::vector<CompileOutcome> compile_shared_objects(const HostCompiler& compiler, const std::vector<CompileJob>& jobs,
                                                   int parallel, int timeout_seconds, const CompileStop& stop = {});

}  // namespace wpk::codegen
