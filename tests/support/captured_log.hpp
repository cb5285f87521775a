#pragma once
// Log lines captured for a test to read while dlock's own threads may still
// write (a release's reply read off the caller's thread logs there): the
// text is read under the sink's own mutex, never racing a write.

#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>

#include <memory>
#include <mutex>
#include <string>

namespace dlock::test {

class CapturedLog {
 public:
  CapturedLog() : sink_(std::make_shared<Sink>()) {}
  std::shared_ptr<spdlog::logger> logger(const std::string& name) const {
    return std::make_shared<spdlog::logger>(name, sink_);
  }
  std::string str() const { return sink_->text(); }

 private:
  class Sink final : public spdlog::sinks::base_sink<std::mutex> {
   public:
    std::string text() {
      std::lock_guard lock(mutex_);
      return text_;
    }

   protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
      spdlog::memory_buf_t formatted;
      formatter_->format(msg, formatted);
      text_.append(formatted.data(), formatted.size());
    }
    void flush_() override {}

   private:
    std::string text_;
  };
  std::shared_ptr<Sink> sink_;
};

}  // namespace dlock::test
