// wpk_server — an HTTP inference server on wpk (cpp-httplib).
//   wpk_server --model [NAME=]MODEL.onnx ... [--host 127.0.0.1] [--port 8080] [--port-file FILE]
//              [--threads N] [--http-threads N] [--max-batch B] [--max-body-mb MB]
// Routes:
//   POST /v1/models/NAME:predict  JSON {"inputs": {"x": {"shape": [...], "data": [...]}}} answers
//                                 {"outputs": {...}}; a TensorProto body (Content-Type
//                                 application/x-protobuf) for a one-input model answers the
//                                 first output (or ?output=NAME) as a TensorProto
//   GET  /v1/models/NAME          the model's inputs and outputs
//   GET  /healthz                 {"status": "ok", ...}
//   GET  /metrics                 requests, latency histogram, errors (Prometheus text)
// Bad requests get a 4xx and one line of JSON: {"error": "...", "code": "..."}. SIGTERM or
// SIGINT stops accepting connections; requests being served are answered before the process
// exits (connections still waiting for an HTTP thread are closed unanswered).
// Every session's runs share the machine's CPUs (wpk queues them), so --http-threads only bounds
// how many requests are read and held in memory at once. A body larger than its model's inputs
// can be (a symbolic dimension taken as --max-batch, default 8) is refused with 413, unread when
// it is larger than any model's; a JSON body holding more values than that is refused as it parses.
#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include <wpk/wpk.hpp>

#include "metrics.hpp"
#include "tensor_json.hpp"

namespace {

using nlohmann::json;

struct Model {
  std::string name;
  std::unique_ptr<wpk::Session> session;
  double max_values = 0;  // the most values its inputs can hold (symbolic dims as --max-batch)
  std::size_t max_body = 0;
};

struct Flags {
  std::vector<std::pair<std::string, std::string>> models;  // name, path
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string port_file;
  int threads = 0;
  int http_threads = 16;
  double max_body_mb = 0;  // 0: from each model's inputs
  int max_batch = 8;       // what a symbolic dimension counts as in that limit
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "wpk_server: %s\n", message.c_str());
  std::exit(2);
}

int int_flag(const std::string& flag, const char* value, int min_value) {
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  if (!*value || *end || v < min_value || v > 1 << 20) usage_error(flag + " takes an integer >= " + std::to_string(min_value));
  return static_cast<int>(v);
}

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage_error("unknown or incomplete option '" + a + "'");
    const char* v = argv[++i];
    if (a == "--model") {
      std::string spec = v, name, path = spec;
      if (const auto eq = spec.find('='); eq != std::string::npos) {
        name = spec.substr(0, eq);
        path = spec.substr(eq + 1);
      } else {
        name = std::filesystem::path(path).stem().string();
      }
      if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != std::string::npos)
        usage_error("model name '" + name + "' may hold only letters, digits, '_', '.' and '-'");
      f.models.emplace_back(name, path);
    } else if (a == "--host") {
      f.host = v;
    } else if (a == "--port") {
      f.port = int_flag(a, v, 0);
    } else if (a == "--port-file") {
      f.port_file = v;
    } else if (a == "--threads") {
      f.threads = int_flag(a, v, 0);
    } else if (a == "--http-threads") {
      f.http_threads = int_flag(a, v, 1);
    } else if (a == "--max-batch") {
      f.max_batch = int_flag(a, v, 1);
    } else if (a == "--max-body-mb") {
      f.max_body_mb = int_flag(a, v, 1);
    } else {
      usage_error("unknown option '" + a + "'");
    }
  }
  if (f.models.empty()) usage_error("give at least one --model [NAME=]MODEL.onnx");
  return f;
}

// An answer other than 200, with its one-line JSON body.
struct HttpError {
  int status;
  std::string code;
  std::string message;
};

// The most values a request for the model can hold: a symbolic dimension counts as --max-batch.
double input_values(const wpk::Session& s, const Flags& flags) {
  double values = 0;
  for (const wpk::ValueInfo& in : s.inputs()) {
    double n = in.dims ? 1 : 1 << 20;  // an input of unknown rank: a million values
    if (in.dims)
      for (const wpk::Dim& d : *in.dims) n *= d.is_static() ? static_cast<double>(std::max<std::int64_t>(d.value, 1)) : flags.max_batch;
    values += n;
  }
  return values;
}

// A body limit from the model's inputs (JSON spends at most ~24 bytes a value), or --max-body-mb.
std::size_t body_limit(double values, const Flags& flags) {
  if (flags.max_body_mb > 0) return static_cast<std::size_t>(flags.max_body_mb * (1 << 20));
  return static_cast<std::size_t>(std::min(values * 24 + (1 << 20), 4.0 * (1 << 30)));
}

// JSON as deep as a request is ({"inputs": {"x": {"data": [values]}}}), holding at most the
// model's values (and its keys and shapes): a parsed value takes many times the bytes it took in
// the body, so a body of "0,0,0,..." or "[[[[..." is refused as it parses, not held.
json parse_bounded(const std::string& text, double max_values) {
  double values = 0;
  return json::parse(text, [&](int depth, json::parse_event_t event, json&) {
    if (depth > 5) throw HttpError{400, "InvalidArgument", "the JSON body nests deeper than a request does"};
    if (event == json::parse_event_t::value && ++values > max_values + 4096)
      throw HttpError{413, "ResourceExhausted", "the JSON body holds more values than the model's inputs can"};
    return true;
  });
}

json dims_json(const std::optional<wpk::DimList>& dims) {
  if (!dims) return nullptr;  // unknown rank
  json out = json::array();
  for (const wpk::Dim& d : *dims) {
    if (d.is_static())
      out.push_back(d.value);
    else
      out.push_back(d.symbol);
  }
  return out;
}

json describe(const Model& m) {
  json out{{"name", m.name}, {"inputs", json::array()}, {"outputs", json::array()}, {"max_body_bytes", m.max_body}};
  for (const wpk::ValueInfo& v : m.session->inputs())
    out["inputs"].push_back({{"name", v.name}, {"dtype", wpk::dtype_name(v.dtype)}, {"shape", dims_json(v.dims)}});
  for (const wpk::ValueInfo& v : m.session->outputs())
    out["outputs"].push_back({{"name", v.name}, {"dtype", wpk::dtype_name(v.dtype)}, {"shape", dims_json(v.dims)}});
  return out;
}


std::string error_body(const std::string& code, const std::string& message) {
  return json{{"error", message}, {"code", code}}.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

const char* code_name(wpk::ErrorCode code) {
  switch (code) {
    case wpk::ErrorCode::InvalidArgument: return "InvalidArgument";
    case wpk::ErrorCode::NotFound: return "NotFound";
    case wpk::ErrorCode::InvalidModel: return "InvalidModel";
    case wpk::ErrorCode::Unsupported: return "Unsupported";
    case wpk::ErrorCode::Io: return "Io";
    case wpk::ErrorCode::ResourceExhausted: return "ResourceExhausted";
    default: return "Internal";
  }
}

int status_of(wpk::ErrorCode code) {
  switch (code) {
    case wpk::ErrorCode::InvalidArgument:
    case wpk::ErrorCode::InvalidModel:  // a tensor body that does not parse
    case wpk::ErrorCode::Unsupported:
      return 400;
    case wpk::ErrorCode::ResourceExhausted:  // the session's memory budget: inputs are bounded before
      return 503;
    default:
      return 500;
  }
}

bool is_protobuf(const httplib::Request& req) {
  const std::string type = req.get_header_value("Content-Type");
  return type.rfind("application/x-protobuf", 0) == 0 || type.rfind("application/octet-stream", 0) == 0;
}

void predict(const Model& m, const httplib::Request& req, httplib::Response& res, double& queued_s) {
  const wpk::Session& s = *m.session;
  if (req.body.size() > m.max_body)
    throw HttpError{413, "ResourceExhausted",
                    "body of " + std::to_string(req.body.size()) + " bytes is larger than model '" + m.name + "' takes (" +
                        std::to_string(m.max_body) + ")"};
  wpk::TensorMap inputs;
  const bool raw = is_protobuf(req);
  if (raw) {
    wpk::Tensor t = wpk::tensor_from_bytes(req.body);
    // The TensorProto's name is not read back by tensor_from_bytes: a one-input model takes it.
    if (s.inputs().size() != 1)
      throw HttpError{400, "InvalidArgument", "model '" + m.name + "' has " + std::to_string(s.inputs().size()) +
                                                  " inputs; send them as JSON"};
    inputs.emplace(s.inputs()[0].name, std::move(t));
  } else {
    const json body = parse_bounded(req.body, m.max_values);
    if (!body.is_object() || !body.contains("inputs") || !body["inputs"].is_object())
      throw HttpError{400, "InvalidArgument", "the body must be {\"inputs\": {\"NAME\": {\"shape\": [...], \"data\": [...]}}}"};
    for (const auto& [name, value] : body["inputs"].items()) {
      const auto in = std::find_if(s.inputs().begin(), s.inputs().end(), [&](const wpk::ValueInfo& v) { return v.name == name; });
      if (in == s.inputs().end()) {
        std::string known;
        for (const wpk::ValueInfo& v : s.inputs()) known += (known.empty() ? "" : ", ") + v.name;
        throw HttpError{400, "InvalidArgument", "model '" + m.name + "' has no input '" + name + "' (its inputs: " + known + ")"};
      }
      inputs.emplace(name, wpk_server::tensor_from_json(value, in->dtype, name));
    }
  }
  wpk::RunProfile profile;
  const wpk::TensorMap out = s.run(inputs, &profile);
  queued_s = profile.queued_us / 1e6;
  if (raw) {
    std::string name = req.has_param("output") ? req.get_param_value("output") : s.outputs()[0].name;
    const auto it = out.find(name);
    if (it == out.end()) throw HttpError{400, "InvalidArgument", "model '" + m.name + "' has no output '" + name + "'"};
    res.set_content(wpk::tensor_to_bytes(it->second, name), "application/x-protobuf");
    return;
  }
  json outputs = json::object();
  for (const auto& [name, t] : out) outputs[name] = wpk_server::tensor_to_json(t);
  res.set_content(json{{"model", m.name}, {"outputs", outputs}}.dump(-1, ' ', false, json::error_handler_t::replace) + "\n",
                  "application/json");
}

// SIGTERM and SIGINT are blocked in every thread and taken here, so the server stops between
// requests and not inside one.
void stop_on_signal(httplib::Server& server, const std::atomic<int>& in_flight) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  sigwait(&set, &sig);
  // stop() does nothing before listening starts: a signal that came during start-up waits.
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::printf("wpk_server: %s: no new connections; %d requests in flight finish first\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
              in_flight.load());
  std::fflush(stdout);
  server.stop();
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse_flags(argc, argv);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread starts: they all inherit it

  std::map<std::string, Model> models;
  try {
    for (const auto& [name, path] : flags.models) {
      if (models.count(name)) usage_error("two models named '" + name + "'");
      const auto t0 = std::chrono::steady_clock::now();
      wpk::SessionOptions options;
      options.threads = flags.threads;
      Model m{name, std::make_unique<wpk::Session>(wpk::load(path), options), 0, 0};
      m.max_values = input_values(*m.session, flags);
      m.max_body = body_limit(m.max_values, flags);
      std::printf("wpk_server: model '%s' (%s) loaded in %.0f ms\n", name.c_str(), path.c_str(),
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      models.emplace(name, std::move(m));
    }
  } catch (const wpk::Error& e) {
    usage_error(e.what());
  }

  wpk_server::Metrics metrics;
  std::atomic<int> in_flight{0};
  std::atomic<std::uint64_t> answered{0};
  httplib::Server server;
  std::size_t max_body = 0;
  for (const auto& [name, m] : models) max_body = std::max(max_body, m.max_body);
  server.set_payload_max_length(max_body);
  const int http_threads = flags.http_threads;
  server.new_task_queue = [http_threads] { return new httplib::ThreadPool(static_cast<std::size_t>(http_threads)); };
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const bool too_large = res.status == 413, no_route = res.status == 404;
    // cpp-httplib caps form-encoded bodies (curl -d's default type) at 8 KiB.
    const bool form = req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0;
    const std::string code = too_large ? "ResourceExhausted" : no_route ? "NotFound" : "InvalidArgument";
    const std::string message = too_large && form ? "form-encoded bodies stop at 8 KiB: send JSON as Content-Type: application/json"
                                : too_large ? "request body larger than any model here takes"
                                : no_route ? "no such route; see GET /healthz and POST /v1/models/NAME:predict"
                                           : "malformed HTTP request";
    res.set_content(error_body(code, message), "application/json");
  });

  server.Get("/healthz", [&](const httplib::Request&, httplib::Response& res) {
    json names = json::array();
    for (const auto& [name, m] : models) names.push_back(name);
    res.set_content(json{{"status", "ok"}, {"models", names}}.dump() + "\n", "application/json");
  });
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.prometheus(), "text/plain; version=0.0.4");
  });
  server.Get(R"(/v1/models/([^/:]+))", [&](const httplib::Request& req, httplib::Response& res) {
    const auto it = models.find(req.matches[1]);
    if (it == models.end()) {
      res.status = 404;
      res.set_content(error_body("NotFound", "no model named '" + std::string(req.matches[1]) + "'"), "application/json");
      return;
    }
    res.set_content(describe(it->second).dump(-1, ' ', false, json::error_handler_t::replace) + "\n", "application/json");
  });
  server.Post(R"(/v1/models/([^/:]+):predict)", [&](const httplib::Request& req, httplib::Response& res) {
    ++in_flight;
    const auto t0 = std::chrono::steady_clock::now();
    std::string label = "-";
    double queued_s = 0;
    try {
      const auto it = models.find(req.matches[1]);
      if (it == models.end()) {
        std::string known;
        for (const auto& [name, m] : models) known += (known.empty() ? "" : ", ") + name;
        throw HttpError{404, "NotFound", "no model named '" + std::string(req.matches[1]) + "' (this server has: " + known + ")"};
      }
      label = it->first;
      predict(it->second, req, res, queued_s);
      res.status = 200;
    } catch (const HttpError& e) {
      res.status = e.status;
      res.set_content(error_body(e.code, e.message), "application/json");
    } catch (const json::exception& e) {
      res.status = 400;
      res.set_content(error_body("InvalidArgument", std::string("malformed JSON body: ") + e.what()), "application/json");
    } catch (const wpk::Error& e) {
      res.status = status_of(e.code());
      res.set_content(error_body(code_name(e.code()), e.what()), "application/json");
    } catch (const std::bad_alloc&) {
      res.status = 503;
      res.set_content(error_body("ResourceExhausted", "out of memory for this request"), "application/json");
    }
    metrics.record(label, res.status, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), queued_s);
    ++answered;
    --in_flight;
  });

  const int port = flags.port == 0 ? server.bind_to_any_port(flags.host) : (server.bind_to_port(flags.host, flags.port) ? flags.port : -1);
  if (port < 0) usage_error("cannot listen on " + flags.host + ":" + std::to_string(flags.port));
  if (!flags.port_file.empty()) {
    const std::string tmp = flags.port_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    std::filesystem::rename(tmp, flags.port_file);
  }
  std::printf("wpk_server: listening on http://%s:%d\n", flags.host.c_str(), port);
  std::fflush(stdout);
  std::thread(stop_on_signal, std::ref(server), std::cref(in_flight)).detach();
  server.listen_after_bind();
  std::printf("wpk_server: stopped; %llu prediction requests answered\n", static_cast<unsigned long long>(answered.load()));
  return 0;
}
