#include "conveyor/data/supervised_documents.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"
#include "conveyor/data/byte_tokenizer.h"

namespace conveyor {
namespace {

// Bytes, with BOS 256 and EOS 257: a tokenizer a chat template can use.
class ChatTokenizer : public ByteTokenizer {
 public:
  int64_t vocab_size() const override { return 258; }
  int64_t bos_id() const override { return 256; }
  int64_t eos_id() const override { return 257; }
  int64_t end_of_document() const override { return 257; }
};

std::vector<MaskedTokens> Encoded(const std::string& path, ChatTemplate chat,
                                  const Tokenizer& tokenizer) {
  std::vector<MaskedTokens> out;
  const int64_t count = ForEachSupervisedDocument(
      path, chat, [&](SupervisedDocument&& d) { out.push_back(EncodeSupervised(tokenizer, d)); });
  EXPECT_EQ(count, static_cast<int64_t>(out.size()));
  return out;
}

std::vector<int64_t> Bytes(const std::string& text) { return ByteTokenizer().Encode(text); }

std::vector<int64_t> Cat(std::vector<std::vector<int64_t>> parts) {
  std::vector<int64_t> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

std::vector<int64_t> Repeat(int64_t value, size_t count) {
  return std::vector<int64_t>(count, value);
}

void ExpectRefused(const std::string& path, ChatTemplate chat, const Tokenizer& tokenizer,
                   const std::string& needle) {
  try {
    Encoded(path, chat, tokenizer);
    ADD_FAILURE() << "accepted " << path;
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SupervisedDocumentsTest, OnlyTheCompletionAndItsEndAreTargets) {
  ScratchFolder scratch;
  const std::string path = scratch.Write(
      "a.jsonl", "{\"prompt\": \"Q: 2+2?\", \"completion\": \" 4\"}\n\n"
                 "{\"prompt\": \"\", \"completion\": \"hi\", \"id\": 7}\n");
  const std::vector<MaskedTokens> bytes = Encoded(path, ChatTemplate::kNone, ByteTokenizer());
  ASSERT_EQ(bytes.size(), 2u);
  // The byte tokenizer has no BOS: prompt, completion, the newline that ends a document.
  EXPECT_EQ(bytes[0].tokens, Cat({Bytes("Q: 2+2?"), Bytes(" 4"), Bytes("\n")}));
  EXPECT_EQ(bytes[0].targets, Cat({Repeat(0, 7), Repeat(1, 3)}));
  EXPECT_EQ(bytes[1].tokens, Cat({Bytes("hi"), Bytes("\n")}));
  EXPECT_EQ(bytes[1].targets, Repeat(1, 3));
  // With BOS and EOS ids: BOS opens the document, not a target; EOS ends it, a target.
  const std::vector<MaskedTokens> ids = Encoded(path, ChatTemplate::kNone, ChatTokenizer());
  EXPECT_EQ(ids[0].tokens, Cat({{256}, Bytes("Q: 2+2?"), Bytes(" 4"), {257}}));
  EXPECT_EQ(ids[0].targets, Cat({Repeat(0, 8), Repeat(1, 3)}));
}

TEST(SupervisedDocumentsTest, ALlama2ChatTrainsOnTheAssistantsTurns) {
  ScratchFolder scratch;
  const std::string path = scratch.Write(
      "chat.jsonl",
      R"({"messages": [{"role": "system", "content": " Be brief. "},)"
      R"( {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},)"
      R"( {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Bye!\n"}]})"
      "\n");
  const std::vector<MaskedTokens> chat = Encoded(path, ChatTemplate::kLlama2, ChatTokenizer());
  ASSERT_EQ(chat.size(), 1u);
  const std::string first = "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]";
  const std::string second = "[INST] Bye [/INST]";
  EXPECT_EQ(chat[0].tokens, Cat({{256}, Bytes(first), Bytes(" Hello. "), {257}, {256},
                                 Bytes(second), Bytes(" Bye! "), {257}}));
  EXPECT_EQ(chat[0].targets, Cat({Repeat(0, 1 + first.size()), Repeat(1, 9), Repeat(0, 1),
                                  Repeat(0, second.size()), Repeat(1, 7)}));
  // A prompt-completion line in the same file is read as ever.
  const std::string mixed = scratch.Write(
      "mixed.jsonl", "{\"prompt\": \"a\", \"completion\": \"b\"}\n"
                     R"({"messages": [{"role": "user", "content": "u"},)"
                     R"( {"role": "assistant", "content": "v"}]})"
                     "\n");
  EXPECT_EQ(Encoded(mixed, ChatTemplate::kLlama2, ChatTokenizer()).size(), 2u);
  EXPECT_EQ(ParseChatTemplate("llama2"), ChatTemplate::kLlama2);
  EXPECT_EQ(ParseChatTemplate("none"), ChatTemplate::kNone);
  EXPECT_THROW(ParseChatTemplate("chatml"), UserError);
}

TEST(SupervisedDocumentsTest, BadExamplesAreRefusedInOneLineNamingFileAndLine) {
  ScratchFolder scratch;
  const ByteTokenizer bytes;
  const ChatTokenizer ids;
  ExpectRefused(scratch.Write("a.jsonl", "{\"prompt\": \"a\", \"completion\": \"b\"}\n"
                                         "{\"prompt\": \"a\"}\n"),
                ChatTemplate::kNone, bytes, "a.jsonl, line 2: no \"completion\"");
  ExpectRefused(scratch.Write("b.jsonl", "{\"completion\": \"b\"}\n"), ChatTemplate::kNone, bytes,
                "b.jsonl, line 1: no \"prompt\"");
  ExpectRefused(scratch.Write("c.jsonl", "{\"prompt\": \"a\", \"completion\": \"\"}\n"),
                ChatTemplate::kNone, bytes,
                "c.jsonl, line 1: the completion tokenizes to no token");
  ExpectRefused(scratch.Write("d.jsonl", "{\"prompt\": 1, \"completion\": \"b\"}\n"),
                ChatTemplate::kNone, bytes, "\"prompt\" is number, not a string");
  ExpectRefused(scratch.Write("e.jsonl", "[1, 2]\n"), ChatTemplate::kNone, bytes,
                "e.jsonl, line 1: not a JSON object");
  const std::string chat = R"({"messages": [{"role": "user", "content": "u"}]})";
  ExpectRefused(scratch.Write("f.jsonl", chat + "\n"), ChatTemplate::kNone, bytes,
                "needs a template to become tokens: --chat-template llama2");
  ExpectRefused(scratch.Write("g.jsonl", chat + "\n"), ChatTemplate::kLlama2, ids,
                "g.jsonl, line 1: the chat ends with a user turn");
  ExpectRefused(
      scratch.Write("h.jsonl", R"({"messages": [{"role": "assistant", "content": "a"}]})"
                               "\n"),
      ChatTemplate::kLlama2, ids, "message 1 (assistant): expected a user turn here");
  ExpectRefused(
      scratch.Write("i.jsonl", R"({"messages": [{"role": "tool", "content": "a"}]})"
                               "\n"),
      ChatTemplate::kLlama2, ids, "role \"tool\" is none of system, user and assistant");
  ExpectRefused(scratch.Write("j.jsonl", R"({"messages": [{"role": "user", "content": "u"},)"
                                         R"( {"role": "assistant", "content": " "}]})"
                                         "\n"),
                ChatTemplate::kLlama2, ids, "message 2 (assistant): an empty assistant turn");
  ExpectRefused(scratch.Write("k.jsonl", R"({"messages": [{"role": "user", "content": "u"},)"
                                         R"( {"role": "assistant", "content": "a"}]})"
                                         "\n"),
                ChatTemplate::kLlama2, bytes, "the chat template needs the tokenizer's BOS id");
  ExpectRefused(scratch.Write("l.jsonl", "{\"prompt\": \"a\",\n"), ChatTemplate::kNone, bytes,
                "l.jsonl, line 1: not JSON");
}

}  // namespace
}  // namespace conveyor
