// Fuzz target: a checkpoint's meta.json, the manifest (conveyor/formats/checkpoint_files.h).
// It is parsed there and checked against a model by the loading (conveyor/train/checkpoint.h),
// which needs a Trainer, so the nearest unit is the loading itself: a real checkpoint of a
// tiny GPT is saved once, and each input replaces the meta.json of a copy of it, which
// CheckpointConfig and LoadCheckpoint then read. Every input is either refused with a
// UserError or loads. Anything else (a crash, another exception, a sanitizer report) is a
// finding.
//
// The seed fuzz/corpus/checkpoint/meta.json is the manifest this target saves (the scratch
// folder's saved/ keeps it while the target runs); its checksums match that checkpoint.
#include <ATen/Parallel.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "conveyor/comm/local_transport.h"
#include "conveyor/common/error.h"
#include "conveyor/train/builtin_tasks.h"
#include "conveyor/train/checkpoint.h"
#include "fuzz/scratch_dir.h"

namespace conveyor::fuzz {
namespace {

namespace fs = std::filesystem;

// One rank's trainer of a tiny GPT after one step, and the step folder, in `scratch_`, the
// inputs go to.
class Fixture {
 public:
  explicit Fixture(const ScratchDir& scratch) : scratch_(scratch) {
    at::set_num_threads(1);
    std::ofstream corpus(scratch_.path() + "/corpus.txt");
    for (int i = 0; i < 50; ++i) corpus << "a tiny corpus for a tiny model, line " << i << ".\n";
    corpus.close();
    config_.data = scratch_.path() + "/corpus.txt";
    config_.model.layers = 1;
    config_.model.hidden = 8;
    config_.model.heads = 1;
    config_.model.seq_len = 4;
    config_.batch_size = 1;
    config_.microbatches = 1;
    config_.pp = 1;
    config_.schedule = "gpipe";
    config_.steps = 1;
    config_.warmup_steps = 0;
    config_.Validate();
    world_ = LocalWorld(1);
    trainer_ = std::make_unique<Trainer>(config_, MakeTask(config_), world_[0].get());
    trainer_->Step();  // so that the optimizer has state to save
    const fs::path saved =
        SaveCheckpoint(scratch_.path() + "/saved", *trainer_, config_, world_[0].get());
    meta_ = "loaded/" + saved.filename().string() + "/meta.json";
    folder_ = scratch_.path() + "/loaded/" + saved.filename().string();
    fs::create_directories(folder_);
    fs::copy(saved, folder_);
  }

  void Load(const uint8_t* data, size_t size) {
    scratch_.Write(meta_, data, size);
    try {
      CheckpointConfig(folder_);
      LoadCheckpoint(folder_, *trainer_, config_);
    } catch (const UserError&) {
    }
  }

 private:
  const ScratchDir& scratch_;
  TrainConfig config_;
  std::vector<std::unique_ptr<Transport>> world_;
  std::unique_ptr<Trainer> trainer_;
  std::string folder_;  // the copy
  std::string meta_;    // its meta.json, relative to the scratch folder
};

}  // namespace
}  // namespace conveyor::fuzz

namespace {
// Removed at exit. The fixture is made before the first input, so that its second or so is
// not counted against -timeout, and never destroyed (libtorch's statics may be gone by then).
const conveyor::fuzz::ScratchDir scratch;
conveyor::fuzz::Fixture* fixture = nullptr;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fixture = new conveyor::fuzz::Fixture(scratch);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fixture->Load(data, size);
  return 0;
}
