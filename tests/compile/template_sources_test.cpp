#include <gtest/gtest.h>

#include <fstream>

#include "runtime/compile/template_registry.hpp"
#include "runtime/compile/template_sources.hpp"
#include "shardjit/error.hpp"
#include "support/temp_dir.hpp"

namespace shardjit {
namespace {

void write(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

TEST(TemplateSources, EmbeddedCopiesHoldEveryRegisteredTemplate) {
  TemplateSources sources = TemplateSources::embedded();
  for (const TemplateDef& def : template_registry()) {
    EXPECT_TRUE(sources.contains(def.file)) << def.file;
    EXPECT_FALSE(sources.flatten(def.file).empty());
  }
}

TEST(TemplateSources, FlattenInlinesEachIncludeOnceWithLineMarkers) {
  testing::TempDir dir;
  write(dir.path() / "common/a.cuh", "#pragma once\nint a_value = 1;\n");
  write(dir.path() / "b.cuh", "#pragma once\n#include \"common/a.cuh\"\nint b_value = 2;\n");
  write(dir.path() / "main.cuh", "#include \"common/a.cuh\"\n#include \"b.cuh\"\nint main_value = 3;\n");
  std::string flat = TemplateSources::from_folder(dir.path()).flatten("main.cuh");
  EXPECT_EQ(flat.find("a_value"), flat.rfind("a_value")) << "included twice:\n" << flat;
  EXPECT_NE(flat.find("#line 1 \"common/a.cuh\""), std::string::npos) << flat;
  EXPECT_NE(flat.find("#line 3 \"main.cuh\""), std::string::npos) << "resumes the includer's numbering:\n" << flat;
  EXPECT_LT(flat.find("b_value"), flat.find("main_value"));
}

TEST(TemplateSources, UnknownIncludeIsNotFound) {
  testing::TempDir dir;
  write(dir.path() / "main.cuh", "#include \"missing.cuh\"\n");
  try {
    TemplateSources::from_folder(dir.path()).flatten("main.cuh");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("missing.cuh"), std::string::npos);
  }
}

TEST(TemplateSources, MissingFolderIsAClearError) {
  EXPECT_THROW(TemplateSources::from_folder("/nonexistent/shardjit-templates"), Error);
}

}  // namespace
}  // namespace shardjit
