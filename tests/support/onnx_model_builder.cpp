#include "onnx_model_builder.hpp"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <unistd.h>

namespace wpk::testing {
namespace {
void set_type(onnx::ValueInfoProto* v, const std::vector<long>& dims, int elem_type) {
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (long d : dims) {
    auto* dim = shape->add_dim();
    if (d < 0) dim->set_dim_param("N");
    else dim->set_dim_value(d);
  }
}
}  // namespace

OnnxModelBuilder::OnnxModelBuilder(int opset) {
  model.set_ir_version(8);
  auto* op = model.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  model.mutable_graph()->set_name("test");
}

OnnxModelBuilder& OnnxModelBuilder::input(const std::string& name, const std::vector<long>& dims, int elem_type) {
  auto* v = model.mutable_graph()->add_input();
  v->set_name(name);
  set_type(v, dims, elem_type);
  return *this;
}

OnnxModelBuilder& OnnxModelBuilder::output(const std::string& name, const std::vector<long>& dims, int elem_type) {
  auto* v = model.mutable_graph()->add_output();
  v->set_name(name);
  set_type(v, dims, elem_type);
  return *this;
}

OnnxModelBuilder& OnnxModelBuilder::node(const std::string& op, const std::vector<std::string>& ins,
                                         const std::vector<std::string>& outs) {
  auto* n = model.mutable_graph()->add_node();
  n->set_op_type(op);
  for (const auto& i : ins) n->add_input(i);
  for (const auto& o : outs) n->add_output(o);
  return *this;
}

OnnxModelBuilder& OnnxModelBuilder::float_initializer(const std::string& name, const std::vector<long>& dims,
                                                      const std::vector<float>& values) {
  auto* t = model.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (long d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
  return *this;
}

OnnxModelBuilder& OnnxModelBuilder::int64_initializer(const std::string& name, const std::vector<long>& dims,
                                                      const std::vector<long>& values) {
  auto* t = model.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  for (long d : dims) t->add_dims(d);
  for (long v : values) t->add_int64_data(v);
  return *this;
}

OnnxModelBuilder& OnnxModelBuilder::bool_initializer(const std::string& name, bool value) {
  auto* t = model.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::BOOL);
  t->add_int32_data(value ? 1 : 0);
  return *this;
}

namespace {
onnx::AttributeProto* new_attribute(onnx::ModelProto& model, const std::string& name) {
  auto* graph = model.mutable_graph();
  auto* a = graph->mutable_node(graph->node_size() - 1)->add_attribute();
  a->set_name(name);
  return a;
}
}  // namespace

OnnxModelBuilder& OnnxModelBuilder::attr(const std::string& name, long value) {
  auto* a = new_attribute(model, name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
  return *this;
}

OnnxModelBuilder& OnnxModelBuilder::attr(const std::string& name, float value) {
  auto* a = new_attribute(model, name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
  return *this;
}

OnnxModelBuilder& OnnxModelBuilder::attr(const std::string& name, const std::vector<long>& values) {
  auto* a = new_attribute(model, name);
  a->set_type(onnx::AttributeProto::INTS);
  for (long v : values) a->add_ints(v);
  return *this;
}

OnnxModelBuilder& OnnxModelBuilder::attr(const std::string& name, const std::string& value) {
  auto* a = new_attribute(model, name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(value);
  return *this;
}

OnnxModelBuilder& OnnxModelBuilder::attr(const std::string& name, const OnnxModelBuilder& body) {
  auto* a = new_attribute(model, name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = body.model.graph();
  return *this;
}

std::string OnnxModelBuilder::bytes() const { return model.SerializeAsString(); }

std::string OnnxModelBuilder::save(const std::string& path) const {
  std::ofstream(path, std::ios::binary) << bytes();
  return path;
}

namespace {
// Every folder temp_dir made, removed when the test process exits so runs leave nothing behind.
struct TempDirs {
  std::mutex mutex;
  std::vector<std::filesystem::path> made;
  ~TempDirs() {
    std::error_code ec;
    for (const auto& p : made) std::filesystem::remove_all(p, ec);
  }
};
TempDirs& temp_dirs() {
  static TempDirs dirs;
  return dirs;
}
}  // namespace

std::string temp_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  namespace fs = std::filesystem;
  fs::path p = fs::temp_directory_path() / ("wpk_test_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::remove_all(p);
  fs::create_directories(p);
  TempDirs& dirs = temp_dirs();
  std::lock_guard<std::mutex> lock(dirs.mutex);
  dirs.made.push_back(p);
  return p.string();
}

}  // namespace wpk::testing
