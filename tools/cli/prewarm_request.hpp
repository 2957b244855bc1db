// `shardjit prewarm`'s options as given on the command line, and the list of kernels they ask
// for. Everything is checked here, before the cache is opened or anything is compiled, so that a
// bad argument never leaves half a prewarm behind.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/tooling.hpp"

namespace shardjit::cli {

// Comma lists arrive split into their elements.
struct PrewarmOptions {
  std::vector<std::string> configs;  // config.json files or model folders holding one
  // Sizes as typed, parsed by kernels_to_prewarm, so that an error quotes the text (not a value the
  // parser clamped it to).
  std::optional<std::string> hidden;
  std::optional<std::string> vocab;
  std::optional<std::string> valid_vocab;
  std::optional<std::string> shard;      // "START:SIZE"
  std::vector<std::string> tp = {"1"};
  std::vector<std::string> dtypes;       // empty: each model's own (bf16 without one)
  std::vector<std::string> archs;        // empty: SHARDJIT_ARCH, else the arch of GPU 0
  std::vector<std::string> targets = {"int64"};
  std::vector<std::string> bias = {"none"};
  std::string entropy = "off";           // off, on or both
  bool backward = false;                 // also the kernels of LinearLogp::backward
  bool dz_fp32 = false;                  // with backward: also those of ops with dz_fp32
  bool grad_filter = false;              // with backward: also those of ops that filter gradient tiles
  bool collectives = false;              // also ReduceScatter's and MoeCombine's (TP degrees up to 8)
  bool collectives_only = false;         // only those (a model needs --hidden alone)
  std::optional<std::string> jobs;       // parallel compiles; default: one per hardware thread
  bool tune = false;                     // then time the single-GPU forwards' tiles on GPU 0
};

// The number of compile threads --jobs asks for. Throws Error(kInvalidArgument) when it is not a
// whole number from 1 to 1024.
int parse_jobs(const std::optional<std::string>& jobs);

// The kernels to build, deduplicated, in a stable order. Throws Error(kInvalidArgument) naming
// the option or file at fault and what was expected.
std::vector<PrewarmItem> kernels_to_prewarm(const PrewarmOptions& options, const RuntimeConfig& config);

}  // namespace shardjit::cli
