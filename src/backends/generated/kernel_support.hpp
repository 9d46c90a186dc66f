#pragma once
// What the gen backend's kernels share: the target the CPU runs, kernel names, constant weights
// packed once for every kernel that reads them alike, recipes, and the base class that prints a
// kernel's source on demand and holds its compiled code.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/generated/epilogue.hpp"
#include "backends/generated/matmul_expr.hpp"
#include "backends/kernel.hpp"
#include "codegen/cpp_printer.hpp"
#include "codegen/jit/kernel_store.hpp"

namespace wpk::gen {

// The widest target this CPU runs: which ISA a kernel uses is the CPU's answer, its tile the
// search's.
codegen::CpuTarget widest_target();
int vector_registers(codegen::CpuTarget t);

// "f32_matmul__avx512_8x32": the op, the ISA, and rows (or pixels) x columns (or channels) of
// the register tile, `vectors` SIMD vectors wide.
std::string tile_kernel_name(const std::string& op, int rows, int vectors, codegen::CpuTarget target);

// "f32_matmul__avx512_8x32_pcols": tile_kernel_name, then the loop the threads share.
std::string kernel_name(const std::string& op, const MatMulConfig& c, codegen::CpuTarget target);

// N of a config "vectors=N" (N 1, 2 or 4: the SIMD vectors an iteration of a row kernel takes), or
// nullopt for any other text.
std::optional<int> vectors_config(const std::string& config);

// Packed copies of constant weights, shared by the kernels that pack the same tensor into the same
// panels (tuning prepares every configuration; the packing depends only on the panel width). Keyed
// by address, size, layout and a hash of the bytes: another tensor later at the same address is
// never taken for this one.
std::shared_ptr<const std::vector<float>> packed_weights(const codegen::PackRecord& p, const codegen::Schedule& s,
                                                         const Tensor& w);

// A kernel's recipe (codegen/jit/kernel_store.hpp): every input of its schedule and printer that
// is not wpk's own code. prepare() builds the schedule from the spec, the config, the vector width
// and whether B is packed; the printer adds the target and the kernel's name.
class RecipeText {
 public:
  RecipeText& add(const char* key, std::int64_t v) { return add(key, std::to_string(v)); }
  RecipeText& add(const char* key, const std::string& v);
  // The epilogue's fields, their keys after `prefix` (a kernel with two epilogues names them apart).
  RecipeText& add(const Epilogue& e, const std::string& prefix = "");
  const std::string& text() const { return text_; }
  // A sliding window's geometry (a conv's or a pool's spec: input h, w, c; kernel, strides,
  // dilations, leading pads; output size).
  template <typename Spec>
  RecipeText& add_window(const Spec& s) {
    for (const auto& [key, v] : {std::pair<const char*, std::int64_t>{"h", s.h}, {"w", s.w}, {"c", s.c}, {"kh", s.kh},
                                 {"kw", s.kw}, {"sh", s.sh}, {"sw", s.sw}, {"dh", s.dh}, {"dw", s.dw},
                                 {"pad_top", s.pad_top}, {"pad_left", s.pad_left}, {"oh", s.oh}, {"ow", s.ow}})
      add(key, v);
    return *this;
  }

 private:
  std::string text_;
};

// A kernel compiled from generated source: the schedule is printed at the first call of source()
// (a warm load finds the code by recipe and prints nothing), the plan hands the code over with
// set_code() before any run.
class CompiledKernel : public Kernel {
 public:
  CompiledKernel(std::string name, const codegen::Schedule& schedule, codegen::CpuTarget target, std::string recipe);
  // A kernel of several computes sharing their first loop (codegen::lower of stages).
  CompiledKernel(std::string name, std::vector<codegen::Schedule> stages, codegen::CpuTarget target, std::string recipe);
  // For shapes describe() cannot see (an input of unknown rank): a low share, left to measurement.
  KernelProfile profile() const override { return {name_, vector_bits_, 0.2}; }
  const codegen::KernelRecipe* recipe() const override { return code_ ? nullptr : &recipe_; }
  const codegen::KernelSource* source() const override;
  void set_code(std::shared_ptr<const codegen::LoadedKernel> code) override { code_ = std::move(code); }

 protected:
  using Entry = void (*)(float* const*, const std::int64_t*, int);
  // The compiled entry point; fails the run when the plan gave the kernel no code.
  Entry entry(const KernelContext& ctx) const;
  const std::string& name() const { return name_; }
  static void check_f32(const KernelContext& ctx, const Tensor& t, const char* what);
  // Input i's floats, checked to be float32 with `n` elements (a bias: one per channel).
  static const float* channel_input(const KernelContext& ctx, std::size_t i, std::int64_t n, const char* what);
  // Input i's floats, checked to be float32 of the output's shape (a residual).
  static const float* residual_input(const KernelContext& ctx, std::size_t i, const Shape& y_shape);

 private:
  codegen::KernelSource print() const;

  std::string name_;
  int vector_bits_;
  std::vector<codegen::Schedule> stages_;
  codegen::CpuTarget target_;
  codegen::KernelRecipe recipe_;
  mutable std::once_flag printed_;
  mutable codegen::KernelSource source_;
  std::shared_ptr<const codegen::LoadedKernel> code_;
};

}  // namespace wpk::gen
