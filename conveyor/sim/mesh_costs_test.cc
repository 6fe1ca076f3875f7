#include "conveyor/sim/mesh_costs.h"

#include <gtest/gtest.h>

#include "conveyor/common/error.h"
#include "conveyor/schedule/program_testing.h"

namespace conveyor {
namespace {

CostModel Uniform(double f, double i, double w) {
  CostModel c;
  c.uniform = StageCost{f, i, w};
  return c;
}

MeshNetwork Network(int ranks_per_node) {
  MeshNetwork network;
  network.intra = Link{0.1, 16};
  network.inter = Link{0.25, 8};
  network.ranks_per_node = ranks_per_node;
  return network;
}

// A 16-byte activation (1 x 2 x 4 x 2 bytes) through 3 blocks per stage.
ModelShape Tiny() {
  ModelShape shape;
  shape.hidden = 4;
  shape.seq_len = 2;
  shape.micro_batch_size = 1;
  shape.layers_per_stage = 3;
  shape.element_bytes = 2;
  return shape;
}

TEST(MeshCostsTest, TensorParallelAddsTwoAllReducesPerBlockToEachForwardAndBackward) {
  const Program p = MakeProgram(Layout::Loop(1, 1, 1), {"0F0 0B0"});
  // tp 2, one rank per node: the group {0, 1} crosses nodes and runs on the inter link.
  const Mesh mesh = Mesh::Make(2, 1, 2, 1);
  const MeshSimResult across = SimulateMesh(p, Uniform(1, 1, 1), mesh, Network(1), Tiny());
  const double ring = 2 * (2 - 1) / 2.0 * 16 / 8 + 2 * (2 - 1) * 0.25;  // 2.5
  const double t = 2 * 3 * ring;                                        // 15
  ASSERT_EQ(across.tp_time, (std::vector<double>{t}));
  EXPECT_DOUBLE_EQ(across.pipeline.makespan, (1 + t) + (2 + t));
  EXPECT_DOUBLE_EQ(across.step, across.pipeline.makespan);  // no DP
  // Both ranks on one node: the intra link, 2 * 3 * (16 / 16 + 2 * 0.1).
  const MeshSimResult within = SimulateMesh(p, Uniform(1, 1, 1), mesh, Network(2), Tiny());
  EXPECT_DOUBLE_EQ(within.tp_time[0], 2 * 3 * 1.2);
  // Under full recomputation the backward runs the forward's all-reduces again.
  ModelShape full = Tiny();
  full.full_recompute = true;
  EXPECT_DOUBLE_EQ(SimulateMesh(p, Uniform(1, 1, 1), mesh, Network(1), full).pipeline.makespan,
                   (1 + t) + (2 + 2 * t));
  // Sequence parallelism: the forward's bytes as all-gathers and reduce-scatters, the
  // backward's half again (the column-parallel inputs gathered once more).
  ModelShape sequence = Tiny();
  sequence.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(SimulateMesh(p, Uniform(1, 1, 1), mesh, Network(1), sequence).pipeline.makespan,
                   (1 + t) + (2 + 1.5 * t));
}

// The ring: cp - 1 key-value passes a block, each hidden under its step's attention where
// that is longer; the backward's also its cp gradient passes (fp32), exposed.
TEST(MeshCostsTest, ContextParallelRingsHideUnderAttentionAsFarAsItLasts) {
  const Program p = MakeProgram(Layout::Loop(1, 1, 1), {"0F0 0B0"});
  const Mesh mesh = Mesh::Make(
      2, {{MeshAxis::kCp, 2}, {MeshAxis::kDp, 1}, {MeshAxis::kTp, 1}, {MeshAxis::kPp, 1}});
  ModelShape shape = Tiny();  // 16 bytes an activation, 8 a rank at cp 2
  shape.cp = 2;
  shape.attention_s = 0.5;  // 0.25 a step
  // intra link: 0.1 s + 2 x 8 / 16 = 1.1 s a key-value pass; gradients 0.1 + 2 x 8 x 2 / 16.
  const MeshSimResult r = SimulateMesh(p, Uniform(1, 1, 1), mesh, Network(2), shape);
  const double kv = 1.1, grads = 0.1 + 2.0 * 8 * 2 / 16;
  ASSERT_EQ(r.cp_forward.size(), 1u);
  EXPECT_DOUBLE_EQ(r.cp_forward[0], 3 * (kv - 0.25));
  EXPECT_DOUBLE_EQ(r.cp_backward[0], 3 * ((kv - 0.5) + 2 * grads));
  EXPECT_DOUBLE_EQ(r.pipeline.makespan, (1 + r.cp_forward[0]) + (2 + r.cp_backward[0]));
  // Attention long enough: the forward's passes all hidden.
  shape.attention_s = 10;
  EXPECT_DOUBLE_EQ(SimulateMesh(p, Uniform(1, 1, 1), mesh, Network(2), shape).cp_forward[0], 0);
}

TEST(MeshCostsTest, WeightGradientsExchangeNothingAndOverlappedUnitsPayBothHalves) {
  const Mesh mesh = Mesh::Make(2, 1, 2, 1);
  const double t = 2 * 3 * 2.5;
  const Program split = MakeProgram(Layout::Loop(1, 1, 1), {"0F0 0I0 0W0"});
  EXPECT_DOUBLE_EQ(SimulateMesh(split, Uniform(1, 1, 1), mesh, Network(1), Tiny()).step,
                   (1 + t) + (1 + t) + 1);
  const Program overlapped = MakeProgram(Layout::Loop(1, 1, 2), {"0F0 (0F1;0B0)OVERLAP_F_B 0B1"});
  CostModel costs = Uniform(1, 1, 1);
  costs.uniform.overlap = 2;
  EXPECT_DOUBLE_EQ(SimulateMesh(overlapped, costs, mesh, Network(1), Tiny()).step,
                   (1 + t) + (2 + 2 * t) + (2 + t));
}

TEST(MeshCostsTest, ExpertParallelAddsEachSparseBlocksAllToAllsToItsForwardAndBackward) {
  // dp 2 with ep 2 over it, one stage of 2 sparse blocks, 4 experts, top 2: each all-to-all
  // of rows moves 1/2 of 2 x 16 bytes over the intra link (16 B/s, 0.1 s a hop), the counts'
  // 1/2 of 32.
  const Program p = MakeProgram(Layout::Loop(1, 1, 1), {"0F0 0B0"});
  const Mesh mesh = Mesh::Make(2, 2, 1, 1);
  ModelShape shape = Tiny();
  shape.bucket_bytes = 1e9;
  shape.param_bytes_per_stage = 1e-9;  // the DP reduction out of the way
  shape.ep = 2;
  shape.experts = 4;
  shape.top_k = 2;
  shape.sparse_per_stage = {2};
  const double rows = 0.5 * 32 / 16 + 0.1, counts = 0.5 * 32 / 16 + 0.1;
  const double forward = 2 * (counts + 2 * rows), backward = 2 * 2 * rows;
  const MeshSimResult r = SimulateMesh(p, Uniform(1, 1, 1), mesh, Network(2), shape);
  ASSERT_EQ(r.ep_time.size(), 1u);
  EXPECT_DOUBLE_EQ(r.ep_time[0], forward);
  EXPECT_DOUBLE_EQ(r.ep_comm, forward + backward);
  EXPECT_NEAR(r.step_without_dp, (1 + forward) + (2 + backward), 1e-12);
  // Full recomputation runs the forward's all-to-alls again in the backward.
  shape.full_recompute = true;
  EXPECT_NEAR(SimulateMesh(p, Uniform(1, 1, 1), mesh, Network(2), shape).step_without_dp,
              (1 + forward) + (2 + backward + forward), 1e-12);
  // ep 1: no all-to-all.
  shape.ep = 1;
  EXPECT_TRUE(SimulateMesh(p, Uniform(1, 1, 1), mesh, Network(2), shape).ep_time.empty());
}

TEST(MeshCostsTest, PairsAtOnceHideTheAllToAllsUnlessTheRanksShareADevice) {
  const Program p = MakeProgram(Layout::Loop(1, 1, 2), {"0F0 (0F1;0B0)OVERLAP_F_B 0B1"});
  const Mesh mesh = Mesh::Make(2, 2, 1, 1);
  ModelShape shape = Tiny();
  shape.param_bytes_per_stage = 1e-9;
  shape.ep = 2;
  shape.experts = 2;
  shape.top_k = 1;
  shape.sparse_per_stage = {1};
  const double rows = 0.5 * 16 / 16 + 0.1, counts = 0.5 * 16 / 16 + 0.1;
  const double forward = counts + 2 * rows, backward = 2 * rows;  // 1.8, 1.2
  CostModel costs = Uniform(4, 4, 4);                             // B 8
  const double in_turn = SimulateMesh(p, costs, mesh, Network(2), shape).step_without_dp;
  EXPECT_NEAR(in_turn, 2 * (4 + forward) + 2 * (8 + backward), 1e-12);
  costs.pairs_at_once = true;  // the pair's waits under the other half's compute
  EXPECT_NEAR(SimulateMesh(p, costs, mesh, Network(2), shape).step_without_dp,
              in_turn - forward - backward, 1e-12);
  costs.sharing = ComputeSharing::OneDevice(1, 0.5);  // the waits are work on shared cores
  const double shared = SimulateMesh(p, costs, mesh, Network(2), shape).step_without_dp;
  costs.pairs_at_once = false;
  EXPECT_NEAR(shared, SimulateMesh(p, costs, mesh, Network(2), shape).step_without_dp, 1e-12);
}

TEST(MeshCostsTest, TheSlowestGroupAtAPipelineRankSetsItsTime) {
  // tp 2 x pp 3 on nodes of 3: TP groups {0,1} (node 0), {2,3} (nodes 0 and 1), {4,5}
  // (node 1); pipeline rank 1 alone pays the inter-node link.
  const Mesh mesh = Mesh::Make(6, 1, 2, 3);
  const Program p = MakeProgram(Layout::Loop(3, 1, 1), {"0F0 0B0", "1F0 1B0", "2F0 2B0"});
  const MeshSimResult r = SimulateMesh(p, Uniform(1, 1, 1), mesh, Network(3), Tiny());
  EXPECT_EQ(r.tp_time, (std::vector<double>{2 * 3 * 1.2, 2 * 3 * 2.5, 2 * 3 * 1.2}));
}

TEST(MeshCostsTest, WithoutTpOrDpThePipelineIsSimulateItself) {
  const Program p = MakeProgram(Layout::Loop(2, 1, 2), {"0F0 0F1 0B0 0B1", "1F0 1F1 1B0 1B1"});
  const MeshSimResult r =
      SimulateMesh(p, Uniform(1, 1, 1), Mesh::Make(2, 1, 1, 2), Network(1), Tiny());
  const SimResult plain = Simulate(p, Uniform(1, 1, 1));
  EXPECT_DOUBLE_EQ(r.pipeline.makespan, plain.makespan);
  EXPECT_DOUBLE_EQ(r.pipeline.steady_state_period, plain.steady_state_period);
  EXPECT_EQ(r.tp_time, (std::vector<double>{0, 0}));
  EXPECT_DOUBLE_EQ(r.step, plain.makespan);
  EXPECT_TRUE(r.pipeline.timeline.phases.empty());
}

TEST(MeshCostsTest, DataParallelReductionsOverlapTheRestOfThePipeline) {
  // One rank holding stages 0 and 1: F F B B with F = 1, B = 2. Stage 1's gradients are
  // ready at 4, stage 0's at 6 (the pipeline's end).
  const Program p = MakeProgram(Layout::Loop(1, 2, 1), {"0F0 1F0 1B0 0B0"});
  const Mesh mesh = Mesh::Make(2, 2, 1, 1);  // dp 2 on one node: the intra link
  MeshNetwork network = Network(0);
  network.intra = Link{0, 1};
  ModelShape shape = Tiny();
  shape.param_bytes_per_stage = 3;  // one bucket: 2 (1/2) 3 / 1 = 3 per stage
  const MeshSimResult r = SimulateMesh(p, Uniform(1, 1, 1), mesh, network, shape);
  EXPECT_EQ(r.dp_time, (std::vector<double>{3}));
  EXPECT_EQ(r.dp_buckets, 1);
  EXPECT_DOUBLE_EQ(r.step_without_dp, 6);
  // Stage 1 reduces over [4, 7], stage 0 queues behind it over [7, 10].
  EXPECT_DOUBLE_EQ(r.step, 10);
  EXPECT_DOUBLE_EQ(r.step, r.step_without_dp + r.dp_exposed);
  EXPECT_DOUBLE_EQ(r.dp_comm, 6);
  EXPECT_DOUBLE_EQ(r.dp_hidden_share, 2.0 / 6);  // [4, 6] of the 6
  EXPECT_GT(r.dp_hidden_share, 0);
  EXPECT_LT(r.dp_hidden_share, 1);
  ASSERT_EQ(r.pipeline.timeline.phases.size(), 2u);
  EXPECT_EQ(r.pipeline.timeline.phases[0].name, "dp all-reduce stage 1");
  EXPECT_EQ(r.pipeline.timeline.phases[0].track, PhaseTrack::kDataParallel);
  EXPECT_DOUBLE_EQ(r.pipeline.timeline.phases[0].start, 4);
  EXPECT_DOUBLE_EQ(r.pipeline.timeline.phases[1].end, 10);
  EXPECT_DOUBLE_EQ(r.pipeline.timeline.makespan(), r.step);
}

TEST(MeshCostsTest, BucketsEachPayTheLatency) {
  const Program p = MakeProgram(Layout::Loop(1, 1, 1), {"0F0 0B0"});
  MeshNetwork network = Network(0);
  network.intra = Link{0.5, 1};
  ModelShape shape = Tiny();
  shape.param_bytes_per_stage = 3;
  shape.bucket_bytes = 1;
  const MeshSimResult r = SimulateMesh(p, Uniform(1, 1, 1), Mesh::Make(4, 4, 1, 1), network, shape);
  EXPECT_EQ(r.dp_buckets, 3);
  // 2 (3/4) 3 / 1 over all bytes, 2 * 3 * 0.5 latency per bucket.
  EXPECT_DOUBLE_EQ(r.dp_time[0], 2 * 0.75 * 3 + 3 * (2 * 3 * 0.5));
  // Nothing left to overlap: the whole reduction is exposed.
  EXPECT_DOUBLE_EQ(r.step, 3 + r.dp_time[0]);
  EXPECT_DOUBLE_EQ(r.dp_hidden_share, 0);
}

TEST(MeshCostsTest, On1F1BTheLastStageHidesItsReduction) {
  // 1F1B on 2 ranks: rank 1's stage is done one backward (2) before rank 0's, so its
  // reduction (1 here) hides entirely while rank 0's is all exposed.
  const Program p = MakeProgram(Layout::Loop(2, 1, 4), {"0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3",
                                                        "1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3"});
  MeshNetwork network = Network(0);
  network.intra = Link{0, 16};
  ModelShape shape = Tiny();
  shape.param_bytes_per_stage = 16;  // 2 (1/2) 16 / 16 = 1 per stage
  const MeshSimResult r = SimulateMesh(p, Uniform(1, 1, 1), Mesh::Make(4, 2, 1, 2), network, shape);
  EXPECT_EQ(r.dp_time, (std::vector<double>{1, 1}));
  EXPECT_DOUBLE_EQ(r.step, r.step_without_dp + 1);
  EXPECT_DOUBLE_EQ(r.step, r.step_without_dp + r.dp_exposed);
  EXPECT_DOUBLE_EQ(r.dp_comm, 2);
  EXPECT_DOUBLE_EQ(r.dp_hidden_share, 0.5);
}

TEST(MeshCostsTest, DerivedParameterBytesSplitOverTp) {
  ModelShape shape;
  shape.hidden = 10;
  shape.layers_per_stage = 2;
  shape.element_bytes = 4;
  EXPECT_DOUBLE_EQ(shape.stage_param_bytes(2), 12.0 * 100 * 2 * 4 / 2);
  shape.param_bytes_per_stage = 7;
  EXPECT_DOUBLE_EQ(shape.stage_param_bytes(2), 7);
  EXPECT_DOUBLE_EQ(Tiny().activation_bytes(), 16);
}

TEST(MeshCostsTest, TheMeshMustMatchTheProgram) {
  const Program p = MakeProgram(Layout::Loop(2, 1, 1), {"0F0 0B0", "1F0 1B0"});
  EXPECT_THROW(SimulateMesh(p, Uniform(1, 1, 1), Mesh::Make(4, 1, 1, 4), Network(1), Tiny()),
               UserError);
  EXPECT_THROW(SimulateMesh(p, Uniform(1, 1, 1), Mesh::Make(8, 2, 2, 2), Network(3), Tiny()),
               UserError);
}

}  // namespace
}  // namespace conveyor
