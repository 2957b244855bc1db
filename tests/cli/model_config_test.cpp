// The config.json parser of `shardjit prewarm`, tested directly.
#include "tools/cli/model_config.hpp"
#include "shardjit/error.hpp"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "support/temp_dir.hpp"
#include "tests/cli/cli_runner.hpp"

namespace shardjit::cli {
namespace {

namespace fs = std::filesystem;

std::string error_of(std::string_view text) {
  try {
    parse_model_config(text, "config.json");
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    return error.what();
  }
  ADD_FAILURE() << "no error for: " << text;
  return {};
}

TEST(CliModelConfig, ReadsTopLevelFields) {
  ModelConfig config = parse_model_config(R"({"hidden_size": 4096, "vocab_size": 128256, "torch_dtype": "bfloat16"})", "m");
  EXPECT_EQ(config.name, "m");
  EXPECT_EQ(config.hidden, 4096);
  EXPECT_EQ(config.vocab, 128256);
  EXPECT_EQ(model_dtype(config), DType::kBF16);
}

TEST(CliModelConfig, TextConfigWinsOverTopLevel) {
  ModelConfig config = parse_model_config(
      R"({"hidden_size": 1152, "torch_dtype": "float16",
          "text_config": {"hidden_size": 2560, "vocab_size": 262208}})",
      "gemma");
  EXPECT_EQ(config.hidden, 2560);
  EXPECT_EQ(config.vocab, 262208);
  EXPECT_EQ(model_dtype(config), DType::kFP16) << "the dtype may stay at the top level";
}

TEST(CliModelConfig, NullInTextConfigFallsBackToTopLevel) {
  ModelConfig config = parse_model_config(
      R"({"hidden_size": 64, "vocab_size": 300, "text_config": {"vocab_size": null}})", "m");
  EXPECT_EQ(config.vocab, 300);
}

TEST(CliModelConfig, DtypeSpellings) {
  struct Case {
    const char* json;
    DType expected;
  };
  const Case cases[] = {
      {R"({"hidden_size": 8, "vocab_size": 8, "torch_dtype": "bfloat16"})", DType::kBF16},
      {R"({"hidden_size": 8, "vocab_size": 8, "torch_dtype": "float16"})", DType::kFP16},
      {R"({"hidden_size": 8, "vocab_size": 8, "torch_dtype": "half"})", DType::kFP16},
      {R"({"hidden_size": 8, "vocab_size": 8, "torch_dtype": "float32"})", DType::kFP32},
      {R"({"hidden_size": 8, "vocab_size": 8, "dtype": "float16"})", DType::kFP16},
      {R"({"hidden_size": 8, "vocab_size": 8, "text_config": {"torch_dtype": "float32"}})", DType::kFP32},
      {R"({"hidden_size": 8, "vocab_size": 8})", DType::kBF16},
      {R"({"hidden_size": 8, "vocab_size": 8, "torch_dtype": null})", DType::kBF16},
  };
  for (const Case& c : cases) EXPECT_EQ(model_dtype(parse_model_config(c.json, "m")), c.expected) << c.json;
}

TEST(CliModelConfig, UnknownDtypeIsAnErrorOnlyWhenUsed) {
  ModelConfig config = parse_model_config(R"({"hidden_size": 8, "vocab_size": 8, "torch_dtype": "float8_e4m3fn"})", "m");
  try {
    model_dtype(config);
    FAIL() << "float8 is not a dtype of the kernels";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("float8_e4m3fn"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("--dtype"), std::string::npos);
  }
}

TEST(CliModelConfig, ErrorsNameTheFileAndTheField) {
  EXPECT_NE(error_of(R"({"hidden_size": 64, "vocab_size": )").find("config.json: not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[1, 2]").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": 64})").find("no vocab_size"), std::string::npos);
  EXPECT_NE(error_of(R"({"vocab_size": 64})").find("no hidden_size"), std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": null, "vocab_size": 64})").find("no hidden_size"), std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": "64", "vocab_size": 64})").find("hidden_size is \"64\""), std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": 64.0, "vocab_size": 64})").find("expected a positive integer"), std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": 64, "vocab_size": -3})").find("vocab_size is -3"), std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": 0, "vocab_size": 64})").find("hidden_size is 0"), std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": 18446744073709551615, "vocab_size": 64})").find("hidden_size"), std::string::npos);
  EXPECT_NE(error_of(R"({"hidden_size": 64, "vocab_size": 64, "torch_dtype": 16})").find("torch_dtype is 16"),
            std::string::npos);
}

TEST(CliModelConfig, LoadsFilesAndModelFolders) {
  testing::TempDir temp;
  std::ofstream(temp.path() / "config.json") << R"({"hidden_size": 64, "vocab_size": 300})";
  EXPECT_EQ(load_model_config(temp.path() / "config.json").vocab, 300);
  EXPECT_EQ(load_model_config(temp.path()).vocab, 300) << "a folder stands for its config.json";
  try {
    load_model_config(temp.path() / "missing.json");
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("missing.json' does not exist"), std::string::npos);
  }
}

TEST(CliModelConfig, BundledConfigs) {
  const fs::path examples = fs::path(SHARDJIT_SOURCE_DIR) / "examples" / "configs";
  ModelConfig llama = load_model_config(examples / "llama3-8b.json");
  EXPECT_EQ(llama.hidden, 4096);
  EXPECT_EQ(llama.vocab, 128256);
  EXPECT_EQ(model_dtype(llama), DType::kBF16);
  ModelConfig qwen = load_model_config(examples / "qwen3-8b.json");
  EXPECT_EQ(qwen.hidden, 4096);
  EXPECT_EQ(qwen.vocab, 151936);
  EXPECT_EQ(model_dtype(qwen), DType::kBF16);

  ModelConfig tiny = load_model_config(testing::test_data("tiny.json"));
  EXPECT_EQ(tiny.hidden, 64);
  EXPECT_EQ(tiny.vocab, 300);
  ModelConfig nested = load_model_config(testing::test_data("tiny_nested.json"));
  EXPECT_EQ(nested.hidden, 64) << "not the vision tower's hidden_size";
  EXPECT_EQ(nested.vocab, 320);
  EXPECT_EQ(model_dtype(nested), DType::kFP16);
}

}  // namespace
}  // namespace shardjit::cli
