#include "conveyor/cli/mesh_flags.h"

#include "conveyor/cli/cost_flags.h"
#include "conveyor/common/error.h"
#include "conveyor/common/range_check.h"
#include "conveyor/schedule/pipeline_limits.h"

namespace conveyor {

void MeshFlags::Register(CLI::App& app) {
  app.add_option("--dp", dp, "data-parallel replicas of the pipeline, 1 to 4096 (default 1)");
  app.add_option("--tp", tp, "tensor-parallel ranks per stage, 1 to 4096 (default 1)");
  app.add_option("--gpus-per-node", gpus_per_node,
                 "ranks per node, dividing dp x tp x pp (default 0: all ranks on one node)");
  app.add_option("--mesh-order", order,
                 "mesh axes from the fastest-varying over consecutive ranks (default tp-dp-pp)");
  app.add_option("--intra-latency", network.intra.latency,
                 "seconds per message within a node (default 5e-6)");
  app.add_option("--intra-bandwidth", network.intra.bandwidth,
                 "bytes per second within a node (default 150e9, NVLink class)");
  app.add_option("--inter-latency", network.inter.latency,
                 "seconds per message between nodes (default 1e-5)");
  app.add_option("--inter-bandwidth", network.inter.bandwidth,
                 "bytes per second between nodes (default 25e9, a 200 Gb/s port per GPU)");
  app.add_option("--hidden", shape.hidden, "model width C, for the TP all-reduce (default 4096)");
  app.add_option("--seq-len", shape.seq_len, "tokens per sequence T (default 2048)");
  app.add_option("--micro-batch-size", shape.micro_batch_size,
                 "sequences per micro-batch b on one replica (default 1)");
  app.add_option("--layers-per-stage", shape.layers_per_stage,
                 "transformer blocks per stage (default 1)");
  app.add_option("--element-bytes", shape.element_bytes,
                 "bytes of one activation or gradient element (default 2, bf16)");
  app.add_option("--param-bytes-per-stage", shape.param_bytes_per_stage,
                 "gradient bytes of one stage on one rank (default 0: 12 C^2 x blocks x "
                 "element bytes / tp)");
  app.add_option(
      "--bucket-bytes", shape.bucket_bytes,
      "bytes per DP all-reduce bucket (default 25 MiB, the trainer's on GPUs; plan --auto "
      "--cores: its 4 MiB on the CPU)");
}

bool MeshFlags::shown() const { return dp > 1 || tp > 1 || gpus_per_node > 0; }

Mesh MeshFlags::ToMesh(int pp) const {
  CheckInRange("--dp", dp, 1, kMaxRanks);
  CheckInRange("--tp", tp, 1, kMaxRanks);
  const int64_t world = dp * tp * pp;
  CONVEYOR_CHECK(world <= kMaxMeshRanks) << "dp " << dp << " x tp " << tp << " x pp " << pp << " = "
                                         << world << " ranks, above the limit of " << kMaxMeshRanks;
  return Mesh::Make(static_cast<int>(world), static_cast<int>(dp), static_cast<int>(tp), pp,
                    Mesh::ParseOrder(order));
}

MeshNetwork MeshFlags::ToNetwork(const Mesh& mesh) const {
  CheckInRange("--intra-latency", network.intra.latency, 0, kMaxCostFlag);
  CheckPositiveUpTo("--intra-bandwidth", network.intra.bandwidth, kMaxCostFlag);
  CheckInRange("--inter-latency", network.inter.latency, 0, kMaxCostFlag);
  CheckPositiveUpTo("--inter-bandwidth", network.inter.bandwidth, kMaxCostFlag);
  CheckInRange("--gpus-per-node", gpus_per_node, 0, kMaxMeshRanks);
  MeshNetwork checked = network;
  checked.ranks_per_node = static_cast<int>(gpus_per_node);
  CheckFitsNodes(checked, mesh);
  return checked;
}

ModelShape MeshFlags::ToShape() const {
  CheckInRange("--hidden", shape.hidden, 1, int64_t{1} << 20);
  CheckInRange("--seq-len", shape.seq_len, 1, int64_t{1} << 24);
  CheckInRange("--micro-batch-size", shape.micro_batch_size, 1, int64_t{1} << 20);
  CheckInRange("--layers-per-stage", shape.layers_per_stage, 1, kMaxRanks);
  CheckPositiveUpTo("--element-bytes", shape.element_bytes, 16);
  CheckInRange("--param-bytes-per-stage", shape.param_bytes_per_stage, 0, kMaxCostFlag);
  CheckInRange("--bucket-bytes", shape.bucket_bytes, 1, kMaxCostFlag);
  return shape;
}

}  // namespace conveyor
