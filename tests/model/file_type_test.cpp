// model/file_type: llama.cpp's names for general.file_type values and the
// size class of a parameter count, as llama-bench's model column prints them.
#include "model/file_type.h"

#include <gtest/gtest.h>

namespace minfer::model {
namespace {

TEST(FileType, LlamaCppNames) {
  EXPECT_EQ(file_type_name(0), "all F32");
  EXPECT_EQ(file_type_name(1), "F16");
  EXPECT_EQ(file_type_name(2), "Q4_0");
  EXPECT_EQ(file_type_name(7), "Q8_0");
  EXPECT_EQ(file_type_name(12), "Q3_K - Medium");
  EXPECT_EQ(file_type_name(14), "Q4_K - Small");
  EXPECT_EQ(file_type_name(15), "Q4_K - Medium");
  EXPECT_EQ(file_type_name(17), "Q5_K - Medium");
  EXPECT_EQ(file_type_name(18), "Q6_K");
  EXPECT_EQ(file_type_name(32), "BF16");
  EXPECT_EQ(file_type_name(1024 + 15), "Q4_K - Medium (guessed)");
  EXPECT_EQ(file_type_name(5), std::nullopt);  // retired by llama.cpp
  EXPECT_EQ(file_type_name(999), std::nullopt);
}

TEST(FileType, SizeLabels) {
  EXPECT_EQ(size_label(268'098'176), "270M");    // Gemma 3 270M
  EXPECT_EQ(size_label(494'032'768), "0.5B");    // Qwen2.5-0.5B
  EXPECT_EQ(size_label(596'049'920), "0.6B");    // Qwen3-0.6B
  EXPECT_EQ(size_label(1'235'814'400), "1B");    // Llama 3.2 1B
  EXPECT_EQ(size_label(1'543'714'304), "1.5B");  // Qwen2.5-1.5B
  EXPECT_EQ(size_label(4'022'468'096), "4B");    // Qwen3-4B
  EXPECT_EQ(size_label(7'615'616'512), "7B");    // Qwen2.5-7B
  EXPECT_EQ(size_label(8'030'261'248), "8B");    // Llama 3.1 8B
  EXPECT_EQ(size_label(1'310'000), "1.3M");      // a tiny test model: its own count
  EXPECT_EQ(size_label(420'000), "420K");
  EXPECT_EQ(size_label(250'000'000'000), "250B");
}

}  // namespace
}  // namespace minfer::model
