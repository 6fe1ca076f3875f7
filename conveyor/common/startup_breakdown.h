// Where a rank's start-up went: the seconds of each phase from the process's start to the end
// of its first step. The phases follow one another without a gap, so each is measured as the
// time from the end of those before it (their sum) to the moment it ends (End).
//
// A rank goes through them in the order of the fields, but for the first three: a process
// rank makes its device ready before it connects; rank threads share the process's phase and
// their world's (made before the threads start), then each makes its device ready. Phases a
// rank does not go through stay 0 (resume_s without --resume).
//
// Thread-safety: a value; one per rank.
#ifndef CONVEYOR_COMMON_STARTUP_BREAKDOWN_H_
#define CONVEYOR_COMMON_STARTUP_BREAKDOWN_H_

namespace conveyor {

struct StartupBreakdown {
  // The process's start to conveyor's first act for the rank: the kernel starting it, the
  // dynamic loader mapping libtorch (and on a GPU CUDA's libraries), static initialisers,
  // reading the command line, the launching process's checks of the run.
  double process_s = 0;
  // The world connected: the store, every rank's transport (Gloo, NCCL), the cores gathered and
  // shared.
  double rendezvous_s = 0;
  // The rank's device made ready: on a GPU its context, its BLAS library's handle and
  // workspace (WarmUpDevice: small products waited for); on the CPU its BLAS threads.
  double device_s = 0;
  // The task: its data opened, a corpus read and tokenized.
  double data_s = 0;
  // The model and the trainer: sub-groups, stages built, weights drawn or read and placed,
  // the optimizer and reducers, one message timed to each pipeline neighbour.
  double model_s = 0;
  // A checkpoint read into the trainer (--resume).
  double resume_s = 0;
  // The first step, whole (the device's lazy work included: kernels chosen, memory reserved).
  double first_step_s = 0;

  // Ends phase `field` now (seconds since the process started, less the phases before).
  void End(double StartupBreakdown::*field);
  // The sum of the phases: the process's start to the end of the last phase ended.
  double total_s() const;
};

// The phases by name ("process", "device", ...), in the order of the fields.
struct StartupPhase {
  const char* name;
  double StartupBreakdown::*field;
};
inline constexpr StartupPhase kStartupPhases[] = {
    {"process", &StartupBreakdown::process_s},      {"rendezvous", &StartupBreakdown::rendezvous_s},
    {"device", &StartupBreakdown::device_s},        {"data", &StartupBreakdown::data_s},
    {"model", &StartupBreakdown::model_s},          {"resume", &StartupBreakdown::resume_s},
    {"first step", &StartupBreakdown::first_step_s}};

}  // namespace conveyor

#endif  // CONVEYOR_COMMON_STARTUP_BREAKDOWN_H_
