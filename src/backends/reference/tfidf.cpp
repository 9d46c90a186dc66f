// TfIdfVectorizer: counts, per row of tokens (int32, int64 or string), the n-grams of its pool,
// with up to max_skip_count tokens skipped between an n-gram's items, and weighs the counts (TF,
// IDF or TF-IDF). The pool's n-grams form a prefix tree, so one walk from each token finds every
// pooled n-gram starting there; unigrams are counted once, not once per skip distance.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "backends/reference/common.hpp"
#include "backends/reference/misc_internal.hpp"

namespace wpk::reference {
namespace {

template <typename Key>
struct Trie {
  struct NodeData {
    std::map<Key, int> next;
    int id = 0;  // 1 + the n-gram's index in the pool's n-grams; 0 for a prefix only
  };
  std::vector<NodeData> nodes{NodeData{}};

  int child(int at, const Key& k) const {
    const auto it = nodes[static_cast<std::size_t>(at)].next.find(k);
    return it == nodes[static_cast<std::size_t>(at)].next.end() ? -1 : it->second;
  }
  int add_child(int at, const Key& k) {
    if (const int c = child(at, k); c >= 0) return c;
    nodes.emplace_back();
    const int c = static_cast<int>(nodes.size()) - 1;
    nodes[static_cast<std::size_t>(at)].next.emplace(k, c);
    return c;
  }
};

struct Settings {
  std::int64_t min_gram = 1, max_gram = 1, max_skip = 0;
  std::vector<std::int64_t> counts, indexes;
  std::vector<float> weights;
  std::string mode;
};

// The pool's n-grams in the tree: those of lengths [min_gram, max_gram] get ids; the others only
// take their place in the numbering.
template <typename Key>
Trie<Key> build(const std::vector<Key>& pool, const Settings& s, const KernelContext& ctx) {
  Trie<Key> trie;
  int id = 1;
  for (std::size_t i = 0; i < s.counts.size(); ++i) {
    const std::int64_t size = static_cast<std::int64_t>(i) + 1;
    const std::int64_t start = s.counts[i];
    const std::int64_t end = i + 1 < s.counts.size() ? s.counts[i + 1] : static_cast<std::int64_t>(pool.size());
    if (start < 0 || end < start || end > static_cast<std::int64_t>(pool.size()))
      ctx.fail(ErrorCode::InvalidModel, "ngram_counts does not fit the pool");
    const std::int64_t grams = (end - start) / size;
    if (size < s.min_gram || size > s.max_gram) {
      id += static_cast<int>(grams);
      continue;
    }
    for (std::int64_t g = 0; g < grams; ++g) {
      int at = 0;
      for (std::int64_t k = 0; k < size; ++k) at = trie.add_child(at, pool[static_cast<std::size_t>(start + g * size + k)]);
      trie.nodes[static_cast<std::size_t>(at)].id = id++;
    }
  }
  if (static_cast<std::size_t>(id - 1) > s.indexes.size()) ctx.fail(ErrorCode::InvalidModel, "ngram_indexes is shorter than the pool");
  return trie;
}

template <typename Key>
void count_rows(const Trie<Key>& trie, const std::vector<Key>& tokens, std::int64_t rows, std::int64_t cols,
                const Settings& s, std::int64_t out_size, std::vector<std::int64_t>& freq) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const Key* row = tokens.data() + r * cols;
    std::int64_t first_size = s.min_gram;
    for (std::int64_t skip = 1; skip <= s.max_skip + 1 && skip <= std::max<std::int64_t>(cols, 1); ++skip) {
      for (std::int64_t start = 0; start < cols; ++start) {
        if (start + skip * (first_size - 1) >= cols) break;
        int at = 0;
        for (std::int64_t size = 1, item = start; size <= s.max_gram && item < cols; ++size, item += skip) {
          at = trie.child(at, row[item]);
          if (at < 0) break;
          const int id = trie.nodes[static_cast<std::size_t>(at)].id;
          if (size >= first_size && id != 0) ++freq[static_cast<std::size_t>(r * out_size + s.indexes[static_cast<std::size_t>(id - 1)])];
        }
      }
      if (first_size == 1) {  // unigrams do not depend on the skip distance: counted once
        first_size = 2;
        if (first_size > s.max_gram) break;
      }
    }
  }
}

void tfidf_vectorizer(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Node& n = ctx.node();
  Settings s;
  s.min_gram = n.attr_int("min_gram_length", 1);
  s.max_gram = n.attr_int("max_gram_length", 1);
  s.max_skip = n.attr_int("max_skip_count", 0);
  s.counts = n.attr_ints("ngram_counts");
  s.indexes = n.attr_ints("ngram_indexes");
  s.weights = n.attr_floats("weights");
  s.mode = n.attr_string("mode", "");
  if (s.mode != "TF" && s.mode != "IDF" && s.mode != "TFIDF")
    ctx.fail(ErrorCode::InvalidModel, "mode must be TF, IDF or TFIDF, got '" + s.mode + "'");
  if (s.min_gram < 1 || s.max_gram < s.min_gram || s.max_skip < 0 || s.max_gram > 64 || s.max_skip > (1 << 20))
    ctx.fail(ErrorCode::InvalidModel, "min_gram_length, max_gram_length or max_skip_count is out of range");
  if (s.indexes.empty()) ctx.fail(ErrorCode::InvalidModel, "ngram_indexes is required");
  for (std::int64_t i : s.indexes)
    if (i < 0 || i >= (std::int64_t(1) << 24)) ctx.fail(ErrorCode::InvalidModel, "ngram_indexes holds " + std::to_string(i));
  const std::int64_t out_size = *std::max_element(s.indexes.begin(), s.indexes.end()) + 1;
  if (!s.weights.empty() && static_cast<std::int64_t>(s.weights.size()) < out_size)
    ctx.fail(ErrorCode::InvalidModel, "weights has fewer entries than the output");
  if (x.rank() > 2 || (x.rank() == 2 && x.shape()[0] < 1))
    ctx.fail(ErrorCode::InvalidArgument, "input must be [C] or [B, C], got " + shape_to_string(x.shape()));
  const bool batched = x.rank() == 2;
  const std::int64_t rows = batched ? x.shape()[0] : 1, cols = x.rank() == 0 ? 1 : x.shape().back();
  // Each skip distance walks every start of every row: bounded like the other reference ops'
  // work, so a hostile max_skip_count over a long row cannot keep the run busy for hours.
  const std::int64_t skips = std::min<std::int64_t>(s.max_skip + 1, std::max<std::int64_t>(cols, 1));
  if (static_cast<double>(rows) * static_cast<double>(cols) * static_cast<double>(skips) > static_cast<double>(std::int64_t(1) << 34))
    ctx.fail(ErrorCode::ResourceExhausted, "rows x tokens x skip distances exceed the reference backend's work limit");
  std::vector<std::int64_t> freq(static_cast<std::size_t>(rows * out_size), 0);
  if (x.dtype() == DType::String) {
    const Attribute* pool = n.find_attr("pool_strings");
    if (!pool) ctx.fail(ErrorCode::InvalidModel, "string input needs pool_strings");
    const Trie<std::string> trie = build<std::string>(pool->strings(), s, ctx);
    count_rows(trie, x.strings(), rows, cols, s, out_size, freq);
  } else if (x.dtype() == DType::Int64 || x.dtype() == DType::Int32) {
    const Attribute* pool = n.find_attr("pool_int64s");
    if (!pool) ctx.fail(ErrorCode::InvalidModel, "integer input needs pool_int64s");
    const Trie<std::int64_t> trie = build<std::int64_t>(pool->ints(), s, ctx);
    count_rows(trie, read_int_list(x, ctx), rows, cols, s, out_size, freq);
  } else {
    ctx.fail(ErrorCode::Unsupported, std::string("input must be int32, int64 or string, got ") + dtype_name(x.dtype()));
  }
  Tensor& y = ctx.allocate_output(0, DType::Float32, batched ? Shape{rows, out_size} : Shape{out_size});
  float* py = y.data<float>();
  for (std::size_t i = 0; i < freq.size(); ++i) {
    const float w = s.weights.empty() ? 1.0f : s.weights[i % static_cast<std::size_t>(out_size)];
    const float f = static_cast<float>(freq[i]);
    py[i] = s.mode == "TF" ? f : s.mode == "IDF" ? (freq[i] > 0 ? w : 0.0f) : f * w;
  }
}

}  // namespace

void register_tfidf(OpTable& t) { t.add("TfIdfVectorizer", {tfidf_vectorizer, 1, 1, 9}); }

}  // namespace wpk::reference
