#include "conveyor/timeline/chrome_trace.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>

#include "conveyor/common/error.h"
#include "conveyor/timeline/timeline_testing.h"

namespace conveyor {
namespace {

// A minimal JSON syntax checker (RFC 8259 grammar, no semantic checks).
class JsonChecker {
 public:
  explicit JsonChecker(const std::string& text) : text_(text) {}
  bool Valid() {
    pos_ = 0;
    const bool ok = Value();
    Space();
    return ok && pos_ == text_.size();
  }

 private:
  void Space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Eat(char c) {
    Space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool String() {
    if (!Eat('"')) return false;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      if (static_cast<unsigned char>(text_[pos_]) < 0x20) return false;
      if (text_[pos_] == '\\') {
        ++pos_;
        if (pos_ >= text_.size()) return false;
        if (text_[pos_] == 'u') {
          for (int i = 0; i < 4; ++i) {
            if (++pos_ >= text_.size() || !std::isxdigit(static_cast<unsigned char>(text_[pos_]))) {
              return false;
            }
          }
        } else if (std::string("\"\\/bfnrt").find(text_[pos_]) == std::string::npos) {
          return false;
        }
      }
      ++pos_;
    }
    return Eat('"');
  }
  bool Number() {
    const size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    while (pos_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[pos_])) ||
                                   std::string(".eE+-").find(text_[pos_]) != std::string::npos)) {
      ++pos_;
    }
    return pos_ > start && std::isdigit(static_cast<unsigned char>(text_[pos_ - 1]));
  }
  bool Value() {
    Space();
    if (pos_ >= text_.size()) return false;
    const char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      if (Eat('}')) return true;
      do {
        if (!String() || !Eat(':') || !Value()) return false;
      } while (Eat(','));
      return Eat('}');
    }
    if (c == '[') {
      ++pos_;
      if (Eat(']')) return true;
      do {
        if (!Value()) return false;
      } while (Eat(','));
      return Eat(']');
    }
    if (c == '"') return String();
    for (const char* word : {"true", "false", "null"}) {
      if (text_.compare(pos_, std::string(word).size(), word) == 0) {
        pos_ += std::string(word).size();
        return true;
      }
    }
    return Number();
  }

  const std::string& text_;
  size_t pos_ = 0;
};

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

TEST(JsonCheckerTest, AcceptsAndRejects) {
  EXPECT_TRUE(JsonChecker(R"({"a":[1,-2.5,"x\"\u00e9",true,null,{}]})").Valid());
  EXPECT_FALSE(JsonChecker(R"({"a":[1,]})").Valid());
  EXPECT_FALSE(JsonChecker(R"({"a":"b)").Valid());
  EXPECT_FALSE(JsonChecker("{\"a\":\"\n\"}").Valid());
}

TEST(ChromeTraceTest, OneCompleteEventPerSpan) {
  const Timeline t = GpipeTimeline(3, 4);
  const std::string json = RenderChromeTrace(t);
  EXPECT_TRUE(JsonChecker(json).Valid()) << json;
  EXPECT_EQ(json.rfind("{\"traceEvents\":[", 0), 0u);
  EXPECT_EQ(Count(json, "\"ph\":\"X\""), t.spans.size());
  EXPECT_EQ(Count(json, "\"process_name\""), 3u);
  EXPECT_NE(json.find("\"name\":\"predicted: rank 2\""), std::string::npos);
  // 0F1 runs over [1, 2) units: 1000 us to 2000 us.
  EXPECT_NE(json.find("{\"name\":\"0F1\",\"cat\":\"F\",\"ph\":\"X\",\"pid\":1,\"tid\":0,"
                      "\"ts\":1000,\"dur\":1000,\"args\":{\"stage\":0,\"microbatch\":1,"
                      "\"op\":\"F\"}}"),
            std::string::npos)
      << json;
}

TEST(ChromeTraceTest, PidsPerRankAndArgs) {
  Timeline t = MakeTimeline(
      2,
      {{0, "(0F1;3B0)OVERLAP_F_B", 0.5, 2.25}, {1, "1SEND_B0", 3, 3}, {1, "1REDUCE_GRAD", 4, 4}});
  t.time_unit = TimeUnit::kSeconds;
  const std::string json = RenderChromeTrace(t, "measured");
  EXPECT_TRUE(JsonChecker(json).Valid()) << json;
  EXPECT_NE(json.find("\"name\":\"(0F1;3B0)OVERLAP_F_B\",\"cat\":\"OVERLAP_F_B\",\"ph\":\"X\","
                      "\"pid\":1,\"tid\":0,\"ts\":500000,\"dur\":1750000"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"backward\":\"3B0\""), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"1SEND_B0\",\"cat\":\"SEND_B\",\"ph\":\"X\",\"pid\":2,\"tid\":1"),
            std::string::npos);
  // REDUCE_GRAD has no micro-batch.
  EXPECT_NE(json.find("\"args\":{\"stage\":1,\"op\":\"REDUCE_GRAD\"}"), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"measured: rank 1\""), std::string::npos);
}

TEST(ChromeTraceTest, SeveralTimelinesAsProcessGroups) {
  const Timeline predicted = GpipeTimeline(2, 2);
  Timeline measured = GpipeTimeline(2, 2);
  measured.time_unit = TimeUnit::kSeconds;
  const std::string json =
      RenderChromeTrace({{"predicted", &predicted}, {"measured \"run\"", &measured}});
  EXPECT_TRUE(JsonChecker(json).Valid()) << json;
  EXPECT_EQ(Count(json, "\"ph\":\"X\""), predicted.spans.size() + measured.spans.size());
  EXPECT_NE(json.find("\"name\":\"predicted: rank 1\""), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"measured \\\"run\\\": rank 0\""), std::string::npos);
  EXPECT_EQ(Count(json, "\"pid\":4,\"tid\":0,\"args\":{\"name\":"), 2u);  // name + compute
  EXPECT_EQ(Count(json, "\"pid\":5"), 0u);
}

TEST(ChromeTraceTest, MeasuredPostsWaitsPhasesAndCounters) {
  Timeline t = MakeTimeline(2, {{1, "1RECV_F0", 0, 0.001}, {1, "1RECV_F0", 0.002, 0.004}});
  t.time_unit = TimeUnit::kSeconds;
  t.spans[0].kind = SpanKind::kPost;
  t.spans[1].kind = SpanKind::kWait;
  t.phases.push_back(Phase{1, "optimizer", 0.01, 0.0125});
  t.counters.push_back(CounterSample{0, "activation bytes", 0.003, 4096});
  const std::string json = RenderChromeTrace(t, "measured");
  EXPECT_TRUE(JsonChecker(json).Valid()) << json;
  EXPECT_NE(json.find("{\"name\":\"post 1RECV_F0\",\"cat\":\"post\",\"ph\":\"X\",\"pid\":2,"
                      "\"tid\":1,\"ts\":0,\"dur\":1000"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"name\":\"wait 1RECV_F0\",\"cat\":\"wait\",\"ph\":\"X\",\"pid\":2,"
                      "\"tid\":1,\"ts\":2000,\"dur\":2000"),
            std::string::npos);
  EXPECT_NE(json.find("{\"name\":\"optimizer\",\"cat\":\"phase\",\"ph\":\"X\",\"pid\":2,"
                      "\"tid\":2,\"ts\":10000,\"dur\":2500"),
            std::string::npos);
  EXPECT_NE(json.find("{\"name\":\"activation bytes\",\"ph\":\"C\",\"pid\":1,\"ts\":3000,"
                      "\"args\":{\"value\":4096}}"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(t.makespan(), 0.0125);
}

TEST(ChromeTraceTest, ParallelAxesPhasesHaveTheirOwnThreads) {
  Timeline t = MakeTimeline(1, {{0, "0F0", 0, 0.001}});
  t.time_unit = TimeUnit::kSeconds;
  t.phases.push_back(Phase{0, "all-reduce 4.0 MiB", 0.001, 0.002, PhaseTrack::kDataParallel});
  std::string json = RenderChromeTrace(t, "measured");
  EXPECT_TRUE(JsonChecker(json).Valid()) << json;
  EXPECT_NE(json.find("\"pid\":1,\"tid\":3,\"args\":{\"name\":\"data parallel\"}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("{\"name\":\"all-reduce 4.0 MiB\",\"cat\":\"phase\",\"ph\":\"X\","
                      "\"pid\":1,\"tid\":3,"),
            std::string::npos);
  EXPECT_EQ(json.find("tensor parallel"), std::string::npos);  // no TP phase, no TP thread

  t.phases.push_back(Phase{0, "all-reduce", 0, 0.0005, PhaseTrack::kTensorParallel});
  json = RenderChromeTrace(t, "measured");
  EXPECT_NE(json.find("\"pid\":1,\"tid\":4,\"args\":{\"name\":\"tensor parallel\"}"),
            std::string::npos);
  EXPECT_NE(json.find("{\"name\":\"all-reduce\",\"cat\":\"phase\",\"ph\":\"X\",\"pid\":1,"
                      "\"tid\":4,"),
            std::string::npos);
}

TEST(ChromeTraceTest, RejectsBadInput) {
  EXPECT_THROW(RenderChromeTrace({{"x", nullptr}}), UserError);
  Timeline t = GpipeTimeline(2, 2);
  t.spans[0].end = -1;
  EXPECT_THROW(RenderChromeTrace(t), UserError);
  Timeline bad_phase = GpipeTimeline(2, 2);
  bad_phase.phases.push_back(Phase{2, "optimizer", 0, 1});
  EXPECT_THROW(RenderChromeTrace(bad_phase), UserError);
  Timeline bad_counter = GpipeTimeline(2, 2);
  bad_counter.counters.push_back(CounterSample{0, "bytes", 0, std::nan("")});
  EXPECT_THROW(RenderChromeTrace(bad_counter), UserError);
  Timeline empty;
  EXPECT_TRUE(JsonChecker(RenderChromeTrace(empty)).Valid());
}

}  // namespace
}  // namespace conveyor
