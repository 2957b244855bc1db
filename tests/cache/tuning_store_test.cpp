// Tuning records in the cache folder: the text round-trips, a record is found under its key
// only, and whatever cannot be trusted (garbage, another key, a bad time) is ignored, never used.
#include "runtime/cache/tuning_store.hpp"

#include <filesystem>
#include <fstream>
#include <locale>

#include <gtest/gtest.h>

#include "runtime/cache/cache_dir.hpp"
#include "shardjit/error.hpp"
#include "support/temp_dir.hpp"

namespace shardjit {
namespace {

TuningRecord sample_record() {
  TuningRecord record;
  record.key = "linear_logp_fwd tile; device=NVIDIA H200; H=4096";
  record.device = "NVIDIA H200";
  record.choice = "128x256x64x4-wgmma";
  record.times_ms = {{"128x256x64x4-wgmma", 7.25}, {"128x256x64x3-wgmma", 7.5}, {"128x256x64x3-mma", 12.125}};
  return record;
}

TEST(TuningRecordText, RoundTrips) {
  const TuningRecord record = sample_record();
  const std::string text = format_tuning_record(record);
  EXPECT_EQ(text.rfind("shardjit-tuning 1\n", 0), 0u) << text;
  const std::optional<TuningRecord> parsed = parse_tuning_record(text);
  ASSERT_TRUE(parsed.has_value()) << text;
  EXPECT_EQ(parsed->key, record.key);
  EXPECT_EQ(parsed->device, record.device);
  EXPECT_EQ(parsed->choice, record.choice);
  EXPECT_EQ(parsed->times_ms, record.times_ms);
}

// A program that set a global locale whose decimal point is a comma still writes records that
// parse (they are read with C number rules).
TEST(TuningRecordText, RoundTripsUnderACommaDecimalLocale) {
  struct CommaPoint : std::numpunct<char> {
    char do_decimal_point() const override { return ','; }
  };
  const std::locale before = std::locale::global(std::locale(std::locale::classic(), new CommaPoint));
  const std::string text = format_tuning_record(sample_record());
  std::locale::global(before);
  EXPECT_NE(text.find("7.25"), std::string::npos) << text;
  const std::optional<TuningRecord> parsed = parse_tuning_record(text);
  ASSERT_TRUE(parsed.has_value()) << text;
  EXPECT_EQ(parsed->times_ms, sample_record().times_ms);
}

TEST(TuningRecordText, AnythingElseIsNotARecord) {
  const std::string good = format_tuning_record(sample_record());
  EXPECT_FALSE(parse_tuning_record(""));
  EXPECT_FALSE(parse_tuning_record("shardjit-tuning 2\nkey k\nchoice c\n"));
  EXPECT_FALSE(parse_tuning_record("key k\nchoice c\n"));                        // no header
  EXPECT_FALSE(parse_tuning_record("shardjit-tuning 1\nkey k\n"));               // no choice
  EXPECT_FALSE(parse_tuning_record("shardjit-tuning 1\nkey k\nchoice c\nwhat x\n"));
  EXPECT_FALSE(parse_tuning_record("shardjit-tuning 1\nkey k\nchoice c\ntime a fast\n"));
  EXPECT_FALSE(parse_tuning_record("shardjit-tuning 1\nkey k\nchoice c\ntime a -1\n"));
  EXPECT_FALSE(parse_tuning_record(good.substr(0, good.find("choice"))));       // cut short
}

TEST(TuningRecordText, ValuesMustBeOneLine) {
  TuningRecord record = sample_record();
  record.key = "two\nlines";
  EXPECT_THROW(format_tuning_record(record), Error);
  record = sample_record();
  record.choice.clear();
  EXPECT_THROW(format_tuning_record(record), Error);
  record = sample_record();
  record.times_ms.emplace_back("a name", 1.0);
  EXPECT_THROW(format_tuning_record(record), Error);
}

TEST(TuningStore, SavedRecordIsFoundUnderItsKeyOnly) {
  testing::TempDir dir;
  prepare_cache_dir(dir.path(), true);
  EXPECT_TRUE(std::filesystem::is_directory(cache_tuning_dir(dir.path())));
  const TuningRecord record = sample_record();
  EXPECT_FALSE(load_tuning_record(dir.path(), record.key));
  save_tuning_record(dir.path(), record);
  const std::optional<TuningRecord> loaded = load_tuning_record(dir.path(), record.key);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->choice, record.choice);
  EXPECT_EQ(loaded->times_ms, record.times_ms);
  EXPECT_FALSE(load_tuning_record(dir.path(), record.key + "; rows=1"));

  // A newer record of the same key replaces the old one.
  TuningRecord newer = record;
  newer.choice = "128x256x64x3-mma";
  save_tuning_record(dir.path(), newer);
  EXPECT_EQ(load_tuning_record(dir.path(), record.key)->choice, "128x256x64x3-mma");
}

TEST(TuningStore, UntrustworthyFilesAreIgnored) {
  testing::TempDir dir;
  prepare_cache_dir(dir.path(), true);
  const TuningRecord record = sample_record();
  const std::filesystem::path path = tuning_record_path(dir.path(), record.key);
  // Garbage where the record would be.
  std::ofstream(path) << "not a record\n";
  EXPECT_FALSE(load_tuning_record(dir.path(), record.key));
  // A well-formed record of another key at this key's path.
  TuningRecord other = record;
  other.key = "another key";
  std::ofstream(path, std::ios::trunc) << format_tuning_record(other);
  EXPECT_FALSE(load_tuning_record(dir.path(), record.key));
}

TEST(TuningStore, ListingNamesEveryFileAndTrustsOnlyRecordsUnderTheirKeys) {
  testing::TempDir dir;
  EXPECT_TRUE(list_tuning_records(dir.path() / "missing").empty());
  prepare_cache_dir(dir.path(), true);
  const TuningRecord record = sample_record();
  save_tuning_record(dir.path(), record);
  TuningRecord other = record;
  other.key = "another key";
  std::ofstream(cache_tuning_dir(dir.path()) / "misplaced.txt") << format_tuning_record(other);
  std::ofstream(cache_tuning_dir(dir.path()) / "garbage.txt") << "garbage\n";
  const std::vector<TuningFile> files = list_tuning_records(dir.path());
  ASSERT_EQ(files.size(), 3u);
  std::size_t trusted = 0;
  for (const TuningFile& file : files) {
    if (!file.record) continue;
    ++trusted;
    EXPECT_EQ(file.record->key, record.key);
    EXPECT_EQ(file.path, tuning_record_path(dir.path(), record.key));
  }
  EXPECT_EQ(trusted, 1u);
  EXPECT_EQ(remove_tuning_records(dir.path()), 3u);
  EXPECT_TRUE(list_tuning_records(dir.path()).empty());
  EXPECT_FALSE(load_tuning_record(dir.path(), record.key));
}

}  // namespace
}  // namespace shardjit
