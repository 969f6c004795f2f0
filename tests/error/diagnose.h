// Helpers for the diagnostic tests: parse a source and return the exact formatted diagnostic.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "flashgen/frontend.h"

namespace flashgen::testing {

// The formatted diagnostic of `source` (named t.attn), or "<no error>" when it parses.
inline std::string diagnose(const std::string& source) {
  try {
    parse_source(source, "t.attn");
  } catch (const SourceError& e) {
    return e.what();
  }
  return "<no error>";
}

// One diagnostic test: a source and its exact diagnostic (location, message, line, caret).
struct DiagnosticCase {
  const char* name;
  const char* source;
  const char* expected;
};

inline std::string case_name(const ::testing::TestParamInfo<DiagnosticCase>& info) {
  return info.param.name;
}

}  // namespace flashgen::testing
