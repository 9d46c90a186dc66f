#pragma once
// Registration of the misc group's split-off files (called from register_misc in misc.cpp).
#include "backends/reference/registry.hpp"

namespace wpk::reference {

void register_resize(OpTable& t);    // resize.cpp: Resize, Upsample
void register_quantize(OpTable& t);  // quantize.cpp: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
void register_signal(OpTable& t);    // signal.cpp: windows, DFT, STFT, MelWeightMatrix
void register_sampling(OpTable& t);  // sampling.cpp: GridSample, RoiAlign, Det
void register_qlinear(OpTable& t);   // qlinear.cpp: QLinearMatMul, QLinearConv
void register_sequence(OpTable& t);  // sequence.cpp: Sequence*, SplitToSequence, ConcatFromSequence, Optional*
void register_random(OpTable& t);
void register_tfidf(OpTable& t);     // tfidf.cpp: TfIdfVectorizer
void register_strings(OpTable& t);   // strings.cpp: StringNormalizer, StringConcat, StringSplit, RegexFullMatch
// strings.cpp: Cast when either side is string, Equal of strings; false when not theirs.
bool cast_strings(KernelContext& ctx, DType to);
bool equal_if_strings(KernelContext& ctx);    // random.cpp: RandomUniform(Like), RandomNormal(Like), Bernoulli, Multinomial

}  // namespace wpk::reference
