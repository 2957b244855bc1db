#include "runtime/ops/linear_logp/tp/layout.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>

#include "runtime/ops/linear_logp/layout.hpp"
#include "runtime/ops/linear_logp/combine.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

constexpr const char* kPrefix = "LinearLogp tensor-parallel layout: ";

[[noreturn]] void reject(const std::string& what) { throw Error(ErrorCode::kInvalidArgument, kPrefix + what); }

std::string dtype_text(std::int32_t code) {
  if (code < 0) return "none";
  if (code > static_cast<std::int32_t>(DType::kInt64)) return "dtype#" + std::to_string(code);
  return dtype_name(static_cast<DType>(code));
}

std::string temperature_text(std::uint32_t bits) {
  float value = 0.0f;
  std::memcpy(&value, &bits, sizeof(value));
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", static_cast<double>(value));
  return text;
}

std::string shard_text(const TpLayoutRecord& r) {
  return "[" + std::to_string(r.vocab_start) + ", " + std::to_string(r.vocab_start + r.vocab_local) + ")";
}

std::string all_shards(std::span<const TpLayoutRecord> records) {
  std::string text;
  for (const TpLayoutRecord& r : records) {
    text += (text.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r.rank) + " " + shard_text(r);
  }
  return text;
}

// A field every rank must set alike: its name and its value as text.
struct AgreedField {
  const char* name;
  std::function<std::string(const TpLayoutRecord&)> text;
};

void check_agreement(std::span<const TpLayoutRecord> records) {
  const AgreedField fields[] = {
      {"hidden", [](const TpLayoutRecord& r) { return std::to_string(r.hidden); }},
      {"vocab_global", [](const TpLayoutRecord& r) { return std::to_string(r.vocab_global); }},
      {"valid_vocab", [](const TpLayoutRecord& r) { return std::to_string(r.valid_vocab); }},
      {"dtype", [](const TpLayoutRecord& r) { return dtype_text(r.dtype); }},
      {"target_dtype", [](const TpLayoutRecord& r) { return dtype_text(r.target_dtype); }},
      {"bias_dtype", [](const TpLayoutRecord& r) { return dtype_text(r.bias_dtype); }},
      {"ignore_index", [](const TpLayoutRecord& r) { return std::to_string(r.ignore_index); }},
      // Compared as bits: two temperatures that print alike but differ would give ranks
      // different logits.
      {"temperature",
       [](const TpLayoutRecord& r) {
         char bits[16];
         std::snprintf(bits, sizeof(bits), "%08x", r.temperature_bits);
         return temperature_text(r.temperature_bits) + " (bits " + bits + ")";
       }},
      {"want_entropy", [](const TpLayoutRecord& r) { return std::string(r.want_entropy ? "true" : "false"); }},
      {"want_backward", [](const TpLayoutRecord& r) { return std::string(r.want_backward ? "true" : "false"); }},
      // The split plan is made with rank 0's tile and each rank's kernel walks its own: ranks on
      // GPUs that choose different tiles (different kinds, or SHARDJIT_HOPPER_PATH set apart)
      // would each cover other rows.
      {"forward tile (BM x BN, set by the GPU kind and SHARDJIT_HOPPER_PATH)",
       [](const TpLayoutRecord& r) { return std::to_string(r.tile_bm) + "x" + std::to_string(r.tile_bn); }},
  };
  for (const AgreedField& field : fields) {
    const std::string first = field.text(records[0]);
    bool same = true;
    for (const TpLayoutRecord& r : records) same = same && field.text(r) == first;
    if (same) continue;
    std::string values;
    for (const TpLayoutRecord& r : records) {
      values += (values.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r.rank) + ": " + field.text(r);
    }
    reject(std::string(field.name) + " differs across ranks (" + values + "); every rank must build the op with the same " +
           field.name);
  }
}

void check_coverage(std::span<const TpLayoutRecord> records) {
  const std::string rule = "; the shards must cover [0, vocab_global) contiguously in rank order (shards: " +
                           all_shards(records) + ", vocab_global = " + std::to_string(records[0].vocab_global) + ")";
  std::int64_t end = 0;
  for (const TpLayoutRecord& r : records) {
    const std::string who = "rank " + std::to_string(r.rank) + "'s shard " + shard_text(r);
    if (r.vocab_start > end) {
      reject("ids [" + std::to_string(end) + ", " + std::to_string(r.vocab_start) + ") are on no rank: " + who +
             " starts past the end of the shards before it" + rule);
    }
    if (r.vocab_start < end) {
      reject(who + " overlaps the shards before it, which end at " + std::to_string(end) + rule);
    }
    end = r.vocab_start + r.vocab_local;
  }
  if (end != records[0].vocab_global) {
    reject("ids [" + std::to_string(end) + ", " + std::to_string(records[0].vocab_global) + ") are on no rank" + rule);
  }
}

}  // namespace

TpLayoutRecord make_tp_layout_record(const LinearLogpConfig& config, int rank, int size) {
  TpLayoutRecord record;
  std::memset(&record, 0, sizeof(record));
  record.magic = kTpLayoutMagic;
  record.version = kTpLayoutVersion;
  record.rank = rank;
  record.size = size;
  record.vocab_start = config.vocab_start;
  record.vocab_local = config.vocab_local;
  record.vocab_global = config.vocab_global != 0 ? config.vocab_global : config.vocab_start + config.vocab_local;
  record.valid_vocab = config.valid_vocab != 0 ? config.valid_vocab : record.vocab_global;
  record.hidden = config.hidden;
  record.ignore_index = config.ignore_index;
  record.dtype = static_cast<std::int32_t>(config.dtype);
  record.target_dtype = static_cast<std::int32_t>(config.target_dtype);
  record.bias_dtype = config.bias_dtype ? static_cast<std::int32_t>(*config.bias_dtype) : -1;
  std::memcpy(&record.temperature_bits, &config.temperature, sizeof(record.temperature_bits));
  record.want_entropy = config.want_entropy ? 1 : 0;
  record.want_backward = config.want_backward ? 1 : 0;
  return record;
}

void set_tp_layout_error(TpLayoutRecord& record, const std::string& message) {
  std::memset(record.error, 0, sizeof(record.error));
  const std::string text = message.empty() ? std::string("rejected") : message;
  std::memcpy(record.error, text.data(), std::min(text.size(), sizeof(record.error) - 1));
}

TpLayout check_tp_layout(std::span<const TpLayoutRecord> records, int rank) {
  const auto tp = static_cast<int>(records.size());
  if (tp < 1 || rank < 0 || rank >= tp) {
    throw Error(ErrorCode::kInternal, kPrefix + std::string("rank ") + std::to_string(rank) + " of " +
                                          std::to_string(tp) + " records");
  }
  for (int r = 0; r < tp; ++r) {
    const TpLayoutRecord& record = records[static_cast<std::size_t>(r)];
    if (record.magic != kTpLayoutMagic || record.version != kTpLayoutVersion) {
      reject("rank " + std::to_string(r) + " sent a layout record of another shardjit version (record version " +
             std::to_string(record.version) + ", expected " + std::to_string(kTpLayoutVersion) +
             "); every rank must run the same shardjit build");
    }
    if (record.rank != r || record.size != tp) {
      reject("the record in slot " + std::to_string(r) + " says rank " + std::to_string(record.rank) + " of " +
             std::to_string(record.size) + ", but " + std::to_string(tp) + " ranks answered");
    }
  }
  std::string errors;
  for (const TpLayoutRecord& r : records) {
    const std::string text(r.error, strnlen(r.error, sizeof(r.error)));
    if (!text.empty()) errors += (errors.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r.rank) + ": " + text;
  }
  if (!errors.empty()) reject("the op could not be built on every rank (" + errors + ")");
  if (tp > kMaxCombineSources) {
    reject(std::to_string(tp) + " ranks exceed " + std::to_string(kMaxCombineSources) +
           ", the most partial sources one combine kernel merges");
  }
  check_agreement(records);
  check_coverage(records);

  TpLayout layout;
  layout.tp = tp;
  layout.rank = rank;
  layout.gpu.sm_count = records[0].sm_count;
  layout.gpu.l2_bytes = records[0].l2_bytes;
  for (const TpLayoutRecord& r : records) {
    const std::int64_t valid = std::clamp<std::int64_t>(r.valid_vocab - r.vocab_start, 0, r.vocab_local);
    layout.shards.push_back({r.vocab_start, r.vocab_local, valid});
    layout.max_valid_local = std::max(layout.max_valid_local, valid);
    layout.gpu.sm_count = std::min(layout.gpu.sm_count, r.sm_count);
    layout.gpu.l2_bytes = std::min(layout.gpu.l2_bytes, r.l2_bytes);
  }
  layout.split_tile.bm = records[0].tile_bm;
  layout.split_tile.bn = records[0].tile_bn;
  return layout;
}

}  // namespace shardjit
