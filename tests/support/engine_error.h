#pragma once
// Assertions on EngineError: that something throws one (not another exception, not a crash)
// and that its message names what it should.
#include <gtest/gtest.h>

#include <exception>
#include <initializer_list>
#include <string>
#include <string_view>

#include "engine/error.h"

namespace rwkvd::test {

// Runs `fn`, which must throw rwkvd::engine::EngineError; returns the message ("" after
// recording a failure otherwise).
template <typename Fn>
std::string engine_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const engine::EngineError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected EngineError, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected EngineError, nothing was thrown";
  return "";
}

inline ::testing::AssertionResult message_has(const std::string& msg,
                                              std::initializer_list<std::string_view> parts) {
  for (std::string_view p : parts) {
    if (msg.find(p) == std::string::npos) {
      return ::testing::AssertionFailure() << "message lacks \"" << p << "\": " << msg;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace rwkvd::test
