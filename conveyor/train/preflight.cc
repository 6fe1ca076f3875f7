#include "conveyor/train/preflight.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "conveyor/common/error.h"
#include "conveyor/common/input_path.h"
#include "conveyor/data/blended_lm_stream.h"
#include "conveyor/data/corpus.h"
#include "conveyor/data/open_token_source.h"
#include "conveyor/formats/hf_checkpoint.h"
#include "conveyor/partition/partition.h"
#include "conveyor/schedule/registry.h"
#include "conveyor/schedule/verify.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/checkpoint.h"

namespace conveyor {
namespace {

namespace fs = std::filesystem;

// Throws UserError unless `dir` is a folder in which this process can create a file (a probe
// file, removed at once): permissions, read-only mounts and /proc all say no.
void CheckFolderTakesFiles(const fs::path& dir, std::string_view flag, const std::string& path) {
  std::error_code error;
  CONVEYOR_CHECK(fs::is_directory(dir, error))
      << flag << " '" << path << "': '" << dir.string() << "' is not a folder";
  std::string probe = (dir / ".conveyor-write-check.XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  CONVEYOR_CHECK(fd >= 0) << flag << " '" << path << "': cannot create files in '" << dir.string()
                          << "': " << std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
}

// The folder `path` (created by the run when missing) or its nearest existing parent takes
// new files.
void CheckFolderCanBeWritten(const std::string& path, std::string_view flag) {
  fs::path dir = fs::absolute(path).lexically_normal();
  std::error_code error;
  while (!fs::exists(dir, error) && dir.has_relative_path()) dir = dir.parent_path();
  CheckFolderTakesFiles(dir, flag, path);
}

// The file `path` can be written: a device or FIFO that is writable, or a regular or new
// file in an existing folder that takes new files (the file is replaced atomically).
void CheckFileCanBeWritten(const std::string& path, std::string_view flag) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  CONVEYOR_CHECK(!fs::is_directory(status)) << flag << " '" << path << "' is a folder";
  if (fs::exists(status) && !fs::is_regular_file(status)) {
    CONVEYOR_CHECK(::access(path.c_str(), W_OK) == 0)
        << flag << " '" << path << "' cannot be written: " << std::strerror(errno);
    return;
  }
  const fs::path dir = fs::absolute(path).parent_path();
  CONVEYOR_CHECK(fs::is_directory(dir, error))
      << flag << " '" << path << "': the folder '" << dir.string() << "' does not exist";
  CheckFolderTakesFiles(dir, flag, path);
}

}  // namespace

void PreflightFiles(const TrainConfig& config, DataUse use) {
  const std::string path = config.data == "fortunes" ? kFortunesDir : config.data;
  const std::vector<std::pair<double, std::string>> blend = ParseDataBlend(config.data);
  for (const auto& [weight, source] : blend) {
    CONVEYOR_CHECK(blend.size() == 1 || IsTokenSource(source))
        << "--data: " << source << " in the blend is neither a data set (" << source << ".bin and "
        << source << ".idx) nor a token file (.bin)";
  }
  // A path that exists but cannot be followed (a loop of links) is named by LoadCorpus.
  std::error_code error;
  CONVEYOR_CHECK(fs::exists(path, error) || error || IsTokenData(path))
      << "corpus '" << path << "' does not exist"
      << (config.data == "fortunes" ? " (apt-get install fortunes)"
                                    : ", nor do '" + path + ".bin' and '" + path + ".idx'");
  if (use == DataUse::kTrain) {
    MakeTask(config);
  } else if (IsTokenData(config.data)) {
    OpenTokenSource(config.data);
  } else {
    LoadCorpus(config.data);
  }
  // The model folder's weights: every tensor's name, shape and dtype against its config.json,
  // from the files' headers (HfCheckpoint reads no tensor to open).
  if (!config.model.model_dir.empty()) HfCheckpoint checked(config.model.model_dir);
  if (!config.metrics.empty()) CheckFileCanBeWritten(config.metrics, "--metrics");
  if (!config.trace.empty()) CheckFolderCanBeWritten(config.trace, "--trace");
  if (!config.tensorboard.empty()) CheckFolderCanBeWritten(config.tensorboard, "--tensorboard");
  if (!config.checkpoint_dir.empty()) {
    CheckFolderCanBeWritten(config.checkpoint_dir, "--checkpoint-dir");
  }
  if (!config.resume.empty()) {
    CheckInputPath("--resume", config.resume, PathKind::kFolder);
    CheckResume(config);
  }
}

void PreflightCheck(const TrainConfig& config) {
  config.Validate();
  const Program program = BuildSchedule(
      config.schedule, ScheduleOptions{config.pp, config.microbatches, config.chunks});
  VerifyOrThrow(program);
  // The models are an embedding, `layers` blocks and a head.
  const int layers = config.model.layers + 2, stages = program.layout.pipeline_length();
  CONVEYOR_CHECK(layers >= stages)
      << "cannot split " << layers << " layers into " << stages << " stages: --layers "
      << config.model.layers << " blocks, with the embedding and the head, make " << layers
      << " layers, and each of the " << stages << " stages (" << config.pp << " ranks x "
      << stages / config.pp << " chunks of " << config.schedule
      << ") needs one; use more --layers or fewer stages";
  PartitionEvenly(layers, stages);
  if (config.zero == 1 && config.dp == 1) {
    std::fprintf(stderr,
                 "conveyor: warning: --zero 1 with --dp 1 shards nothing: the AdamW state is "
                 "whole on the one replica\n");
  }
}

}  // namespace conveyor
