// The standard benchmark cases ship inside the repository (tools/bench/shapes.json), where
// shardjit-bench and scripts/gpu-suite.sh read them by default: a user's clone must hold them,
// with every case those tools ask for by name.
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.hpp"

namespace shardjit::testing {
namespace {

namespace fs = std::filesystem;

std::set<std::string> case_names(const nlohmann::json& shapes, const char* section) {
  std::set<std::string> names;
  for (const auto& c : shapes.at(section).at("cases")) names.insert(c.at("name").get<std::string>());
  return names;
}

TEST(BenchShapes, TheStandardCasesShipInTheRepository) {
  const fs::path file = fs::path(SHARDJIT_SOURCE_DIR) / "tools" / "bench" / "shapes.json";
  ASSERT_TRUE(fs::is_regular_file(file)) << file;
  std::ifstream in(file);
  const nlohmann::json shapes = nlohmann::json::parse(in);
  const std::set<std::string> logp = case_names(shapes, "linear_logp");
  // The defaults of shardjit-bench linear-logp-tp and the case gpu-suite.sh times backward on.
  for (const char* name : {"llama3-8b-16k", "llama3-8b-16k-tp2"}) EXPECT_EQ(logp.count(name), 1u) << name;
  for (const auto& c : shapes.at("linear_logp").at("cases")) {
    EXPECT_GT(c.at("n").get<long long>(), 0) << c.dump();
    EXPECT_GT(c.at("hidden").get<long long>(), 0) << c.dump();
    EXPECT_GT(c.at("vocab").get<long long>(), 0) << c.dump();
  }
  EXPECT_FALSE(case_names(shapes, "reduce_scatter").empty());
}

TEST(BenchShapes, TheGpuSuiteDefaultsToThem) {
  const std::string suite = read_text(fs::path(SHARDJIT_SOURCE_DIR) / "scripts" / "gpu-suite.sh");
  EXPECT_NE(suite.find("shapes=${2:-tools/bench/shapes.json}"), std::string::npos);
}

}  // namespace
}  // namespace shardjit::testing
