// wpk_load_client — a bounded load test for wpk_server that checks every answer.
//   wpk_load_client --port P --model NAME --input INPUT.pb [--host 127.0.0.1] [--clients C]
//                   [--requests K] [--duration-s S] [--variants V] [--allow-refused]
// Sends V inputs (the given TensorProto scaled by 1, 1.01, 1.02, ...) one at a time and keeps
// each answer as the serial result; then C clients at once send K requests each (stopping after
// S seconds), and every answer must equal its input's serial result byte for byte. Prints one
// JSON line: requests, wrong and failed answers, throughput, p50 and p99 latency. Exit 0 when
// every answer was right and none failed (--allow-refused: requests the server refused or never
// answered because it was shutting down do not count as failures; wrong answers still do).
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <wpk/wpk.hpp>

namespace {

struct Flags {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string model;
  std::string input;
  int clients = 8;
  int requests = 20;
  double duration_s = 60;
  int variants = 4;
  bool allow_refused = false;
};

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "wpk_load_client: %s\n", message.c_str());
  std::exit(2);
}

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--allow-refused") {
      f.allow_refused = true;
      continue;
    }
    if (i + 1 >= argc) fail("option '" + a + "' needs a value");
    const std::string v = argv[++i];
    if (a == "--host") f.host = v;
    else if (a == "--port") f.port = std::atoi(v.c_str());
    else if (a == "--model") f.model = v;
    else if (a == "--input") f.input = v;
    else if (a == "--clients") f.clients = std::atoi(v.c_str());
    else if (a == "--requests") f.requests = std::atoi(v.c_str());
    else if (a == "--duration-s") f.duration_s = std::atof(v.c_str());
    else if (a == "--variants") f.variants = std::atoi(v.c_str());
    else fail("unknown option '" + a + "'");
  }
  if (f.port <= 0 || f.model.empty() || f.input.empty() || f.clients < 1 || f.requests < 1 || f.variants < 1)
    fail("usage: wpk_load_client --port P --model NAME --input INPUT.pb [--clients C] [--requests K] [--duration-s S] [--variants V]");
  return f;
}

std::vector<std::string> variant_bodies(const wpk::Tensor& input, int variants) {
  if (input.dtype() != wpk::DType::Float32) fail("the input must be float32");
  std::vector<std::string> bodies;
  for (int v = 0; v < variants; ++v) {
    wpk::Tensor t = wpk::Tensor::zeros(wpk::DType::Float32, input.shape());
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = input.data<float>()[i] * (1.0f + 0.01f * static_cast<float>(v));
    bodies.push_back(wpk::tensor_to_bytes(t));
  }
  return bodies;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  const Flags f = parse_flags(argc, argv);
  std::vector<std::string> bodies;
  try {
    bodies = variant_bodies(wpk::load_tensor(f.input), f.variants);
  } catch (const wpk::Error& e) {
    fail(e.what());
  }
  const std::string path = "/v1/models/" + f.model + ":predict";
  const char* type = "application/x-protobuf";

  std::vector<std::string> serial;
  {
    httplib::Client client(f.host, f.port);
    for (const std::string& body : bodies) {
      const auto res = client.Post(path, body, type);
      if (!res) fail("no answer to a serial request: " + httplib::to_string(res.error()));
      if (res->status != 200) fail("serial request answered " + std::to_string(res->status) + ": " + res->body);
      serial.push_back(res->body);
    }
  }

  std::atomic<int> wrong{0}, failed{0}, refused{0};
  std::mutex latencies_mutex;
  std::vector<double> latencies;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(f.duration_s));
  std::vector<std::thread> threads;
  for (int c = 0; c < f.clients; ++c)
    threads.emplace_back([&, c] {
      httplib::Client client(f.host, f.port);
      client.set_read_timeout(120, 0);
      std::vector<double> mine;
      for (int k = 0; k < f.requests && std::chrono::steady_clock::now() < deadline; ++k) {
        const std::size_t v = static_cast<std::size_t>(c + k) % bodies.size();
        const auto t0 = std::chrono::steady_clock::now();
        const auto res = client.Post(path, bodies[v], type);
        mine.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        if (!res) {
          // Refused or cut off before an answer: only a server that is going away does that.
          ++(f.allow_refused ? refused : failed);
          if (f.allow_refused) break;
          continue;
        }
        if (res->status == 200 && res->body == serial[v]) continue;
        if (res->status == 200) ++wrong;
        else ++failed;
      }
      std::lock_guard<std::mutex> lock(latencies_mutex);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int answered = static_cast<int>(latencies.size()) - refused;
  std::printf("{\"clients\": %d, \"requests\": %zu, \"answered\": %d, \"wrong\": %d, \"failed\": %d, \"refused\": %d, "
              "\"per_s\": %.2f, \"p50_ms\": %.3f, \"p99_ms\": %.3f}\n",
              f.clients, latencies.size(), answered, wrong.load(), failed.load(), refused.load(),
              static_cast<double>(answered) / seconds, percentile(latencies, 0.5), percentile(latencies, 0.99));
  return wrong == 0 && failed == 0 ? 0 : 1;
}
