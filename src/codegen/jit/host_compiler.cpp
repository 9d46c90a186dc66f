#include "codegen/jit/host_compiler.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "codegen/jit/file_version.hpp"
#include "codegen/jit/sha256.hpp"

extern char** environ;

namespace wpk::codegen {
namespace {

#ifndef WPK_BUILD_CXX
#define WPK_BUILD_CXX "c++"
#endif

std::vector<std::string> split_words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string read_tail(const std::string& path, std::size_t most) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > most ? "..." + text.substr(text.size() - most) : text;
}

struct Child {
  pid_t pid = -1;
  std::string error;  // when it could not start
};

// Starts argv with stdout and stderr going to log_path (and stdin from /dev/null), in a process
// group of its own: stopping the compiler driver must stop the compilers it started too
// (kill_group), or they would go on compiling as orphans. A non-empty `tmpdir` replaces TMPDIR
// in its environment.
Child spawn(const std::vector<std::string>& argv, const std::string& log_path, const std::string& tmpdir = "") {
  Child child;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  std::vector<std::string> env_words;
  std::vector<char*> env;
  if (!tmpdir.empty()) {
    for (char** e = environ; e && *e; ++e)
      if (std::strncmp(*e, "TMPDIR=", 7) != 0) env_words.push_back(*e);
    env_words.push_back("TMPDIR=" + tmpdir);
    for (std::string& w : env_words) env.push_back(w.data());
    env.push_back(nullptr);
  }
  const int rc = posix_spawnp(&child.pid, args[0], &actions, &attributes, args.data(), env.empty() ? environ : env.data());
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    child.pid = -1;
    child.error = "cannot run '" + argv[0] + "': " + std::string(std::strerror(rc));
  }
  return child;
}

// Stops a child started by spawn and whatever it started, and collects it.
void kill_group(pid_t pid) {
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
}

std::string exit_description(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped";
}

std::string temp_log_path() {
  static int counter = 0;
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/wpk-cxx-" + std::to_string(getpid()) + "-" +
         std::to_string(++counter) + ".log";
}

}  // namespace

std::string HostCompiler::describe() const {
  std::string s;
  for (const std::string& w : command) s += (s.empty() ? "" : " ") + w;
  return s;
}

HostCompiler probe_host_compiler(const std::string& command_line) {
  static std::mutex m;
  static std::map<std::string, HostCompiler> probed;
  std::lock_guard<std::mutex> lock(m);
  const auto known = probed.find(command_line);
  if (known != probed.end()) return known->second;
  HostCompiler c;
  c.command = split_words(command_line);
  if (c.command.empty()) {
    c.why_unusable = "no compiler command given";
  } else {
    std::vector<std::string> argv = c.command;
    argv.push_back("--version");
    const std::string log = temp_log_path();
    const Child child = spawn(argv, log);
    int status = 0;
    if (child.pid < 0) {
      c.why_unusable = child.error;
    } else if (waitpid(child.pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      c.why_unusable = "'" + c.describe() + " --version' failed (" + exit_description(status) + ")";
    } else {
      std::ifstream in(log);
      std::getline(in, c.identity);
      if (c.identity.empty()) c.why_unusable = "'" + c.describe() + " --version' printed nothing";
    }
    std::remove(log.c_str());
  }
  probed.emplace(command_line, c);
  return c;
}

HostCompiler find_host_compiler() {
  const char* env = std::getenv("WPK_CXX");
  return probe_host_compiler(env && *env ? env : WPK_BUILD_CXX);
}

namespace {

// Where `word` runs from: itself when it names a path, else the first executable of PATH; with
// symbolic links resolved. "" when there is none.
std::string executable_of(const std::string& word) {
  std::vector<std::string> candidates;
  if (word.find('/') != std::string::npos) {
    candidates.push_back(word);
  } else if (const char* path = std::getenv("PATH")) {
    std::string dirs = path;
    for (std::size_t at = 0; at <= dirs.size();) {
      const std::size_t end = std::min(dirs.find(':', at), dirs.size());
      if (end > at) candidates.push_back(dirs.substr(at, end - at) + "/" + word);
      at = end + 1;
    }
  }
  for (const std::string& c : candidates) {
    char resolved[PATH_MAX];
    if (access(c.c_str(), X_OK) == 0 && realpath(c.c_str(), resolved)) return resolved;
  }
  return "";
}

// The command's files as they are now, "" when a word is not an executable file.
std::string command_fingerprint(const std::vector<std::string>& command) {
  std::string out;
  for (const std::string& word : command) {
    const std::string file = executable_of(word);
    struct stat st {};
    if (file.empty() || stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
    out += file + ":" + file_version(file) + ";";
  }
  return out;
}

}  // namespace

HostCompiler find_host_compiler(const std::string& folder) {
  const char* env = std::getenv("WPK_CXX");
  const std::string command_line = env && *env ? env : WPK_BUILD_CXX;
  const std::vector<std::string> command = split_words(command_line);
  const std::string fingerprint = command.empty() ? "" : command_fingerprint(command);
  if (folder.empty() || fingerprint.empty()) return probe_host_compiler(command_line);
  // One file per command line: its first line the fingerprint, its second the identity.
  const std::string file = folder + "/compiler-" + sha256_hex(command_line).substr(0, 16) + ".id";
  {
    std::ifstream in(file);
    std::string known_fingerprint, identity;
    if (std::getline(in, known_fingerprint) && std::getline(in, identity) && known_fingerprint == fingerprint &&
        !identity.empty()) {
      HostCompiler c;
      c.command = command;
      c.identity = identity;
      return c;
    }
  }
  HostCompiler c = probe_host_compiler(command_line);
  if (c.usable()) {
    // Written whole or not at all: a temporary renamed into place.
    const std::string tmp = file + ".tmp." + std::to_string(getpid());
    std::ofstream(tmp, std::ios::trunc) << fingerprint << "\n" << c.identity << "\n";
    if (std::rename(tmp.c_str(), file.c_str()) != 0) std::remove(tmp.c_str());
  }
  return c;
}

const std::vector<std::string>& base_compile_flags() {
  // -fno-math-errno and -fno-trapping-math, not -ffast-math: generated kernels must keep NaN and
  // infinity semantics and the evaluation order the reference backend is compared with.
  static const std::vector<std::string> flags = {"-std=c++17", "-O3", "-fPIC", "-shared", "-fno-math-errno",
                                                 "-fno-trapping-math", "-fno-plt", "-w"};
  return flags;
}

bool CompileStop::due() const {
  return (cancel && cancel->load()) || (deadline && std::chrono::steady_clock::now() >= *deadline);
}

std::vector<CompileOutcome> compile_shared_objects(const HostCompiler& compiler, const std::vector<CompileJob>& jobs,
                                                   int parallel, int timeout_seconds, const CompileStop& stop) {
  std::vector<CompileOutcome> outcomes(jobs.size());
  if (!compiler.usable()) {
    for (CompileOutcome& o : outcomes) o.log = compiler.why_unusable;
    return outcomes;
  }
  struct Running {
    std::size_t job;
    pid_t pid;
    std::string log;
    std::chrono::steady_clock::time_point started;
  };
  std::vector<Running> running;
  std::size_t next = 0;
  const std::size_t width = static_cast<std::size_t>(std::max(1, parallel));
  const auto stopped = [](CompileOutcome& o) {
    o.log = "compiling was stopped";
    o.stopped = true;
  };
  while (next < jobs.size() || !running.empty()) {
    if (stop.due())
      for (; next < jobs.size(); ++next) stopped(outcomes[next]);
    while (next < jobs.size() && running.size() < width) {
      const CompileJob& job = jobs[next];
      std::vector<std::string> argv = compiler.command;
      argv.insert(argv.end(), base_compile_flags().begin(), base_compile_flags().end());
      argv.insert(argv.end(), job.flags.begin(), job.flags.end());
      argv.insert(argv.end(), {job.source_path, "-o", job.output_path});
      const std::string log = job.scratch_dir.empty() ? temp_log_path()
                                                      : job.scratch_dir + "/compiler-" + std::to_string(next) + ".log";
      const Child child = spawn(argv, log, job.scratch_dir);
      if (child.pid < 0) {
        outcomes[next].log = child.error;
        std::remove(log.c_str());
      } else {
        running.push_back({next, child.pid, log, std::chrono::steady_clock::now()});
      }
      ++next;
    }
    bool reaped = false;
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      const pid_t done = waitpid(it->pid, &status, WNOHANG);
      const bool late = std::chrono::steady_clock::now() - it->started > std::chrono::seconds(timeout_seconds);
      const bool halt = done == 0 && stop.due();
      if (done == 0 && !late && !halt) {
        ++it;
        continue;
      }
      CompileOutcome& o = outcomes[it->job];
      if (done == 0) {  // past its time, or the batch stopped: stop it and collect it
        kill_group(it->pid);
        if (halt)
          stopped(o);
        else
          o.log = "the compiler ran past " + std::to_string(timeout_seconds) + " s and was stopped";
      } else {
        o.ok = done == it->pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        o.log = read_tail(it->log, 4096);
        if (!o.ok) o.log = "'" + compiler.describe() + "' failed (" + exit_description(status) + "): " + o.log;
      }
      std::remove(it->log.c_str());
      it = running.erase(it);
      reaped = true;
    }
    if (!reaped && !running.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return outcomes;
}

}  // namespace wpk::codegen
