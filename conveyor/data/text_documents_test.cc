#include "conveyor/data/text_documents.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/common/scratch_folder_testing.h"

namespace conveyor {
namespace {

std::vector<std::string> Documents(const std::string& path, const TextDocumentOptions& options) {
  std::vector<std::string> documents;
  const int64_t count =
      ForEachDocument(path, options, [&](std::string_view d) { documents.emplace_back(d); });
  EXPECT_EQ(count, static_cast<int64_t>(documents.size()));
  return documents;
}

void ExpectRefused(const std::string& path, const TextDocumentOptions& options,
                   const std::string& needle) {
  try {
    Documents(path, options);
    ADD_FAILURE() << "accepted " << path;
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TextDocumentsTest, AFileBlocksOrJsonLinesMakeTheDocuments) {
  ScratchFolder scratch;
  const std::string text = scratch.Write("a.txt", "one\ntwo\n\n  \nthree\r\nfour\n\n");
  EXPECT_EQ(Documents(text, {}), (std::vector<std::string>{"one\ntwo\n\n  \nthree\r\nfour\n\n"}));
  TextDocumentOptions blocks;
  blocks.blank_line_blocks = true;
  EXPECT_EQ(Documents(text, blocks), (std::vector<std::string>{"one\ntwo", "three\nfour"}));
  const std::string jsonl =
      scratch.Write("b.jsonl", "{\"text\": \"h\\u00e9\\nllo\", \"id\": 1}\n\n{\"text\": \"\"}\n");
  EXPECT_EQ(Documents(jsonl, {}), (std::vector<std::string>{"h\xc3\xa9\nllo", ""}));
  const std::string other = scratch.Write("c.json", "{\"body\": \"x\"}\n");
  TextDocumentOptions key;
  key.json_key = "body";
  EXPECT_EQ(Documents(other, key), (std::vector<std::string>{"x"}));
}

TEST(TextDocumentsTest, BadInputIsRefusedNamingFileAndLine) {
  ScratchFolder scratch;
  ExpectRefused(scratch.Write("a.jsonl", "{\"text\": \"a\"}\n{\"txt\": \"b\"}\n"), {},
                "a.jsonl, line 2: no \"text\" in this line's object");
  ExpectRefused(scratch.Write("b.jsonl", "{\"text\": 3}\n"), {},
                "b.jsonl, line 1: \"text\" is number, not a string");
  ExpectRefused(scratch.Write("c.jsonl", "{\"text\": \"a\"\n"), {}, "c.jsonl, line 1: not JSON");
  ExpectRefused(scratch.Write("d.txt", "ok\xe2\x82"), {}, "d.txt: not valid UTF-8 at byte 2");
  TextDocumentOptions blocks;
  blocks.blank_line_blocks = true;
  ExpectRefused(scratch.Write("e.txt", "fine\n\nbad \xff here\n"), blocks,
                "e.txt, line 3: not valid UTF-8 at byte 4 of the document (0xff)");
  ExpectRefused(scratch.Path("missing.txt"), {},
                "--input " + scratch.Path("missing.txt") + ": does not exist");
  // A folder is no text file (libstdc++ would throw "basic_filebuf::underflow" reading it).
  ExpectRefused(scratch.path(), {},
                "--input " + scratch.path() + ": is a directory, expected a file");
}

}  // namespace
}  // namespace conveyor
