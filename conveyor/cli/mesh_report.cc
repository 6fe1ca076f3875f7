#include "conveyor/cli/mesh_report.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "conveyor/cli/plan_report.h"

namespace conveyor {
namespace {

constexpr MeshAxis kAxes[] = {MeshAxis::kTp, MeshAxis::kDp, MeshAxis::kPp};

// "{0,4}"
std::string GroupText(const std::vector<int>& group) {
  std::string text;
  for (int rank : group) text += (text.empty() ? "{" : ",") + std::to_string(rank);
  return text + "}";
}

// "0 and 1", "0, 1 and 2"
std::string NodesText(const std::vector<int>& nodes) {
  std::string text;
  for (size_t k = 0; k < nodes.size(); ++k) {
    text += (k == 0 ? "" : k + 1 == nodes.size() ? " and " : ", ") + std::to_string(nodes[k]);
  }
  return text;
}

std::string Upper(MeshAxis axis) {
  std::string name(MeshAxisName(axis));
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

int Digits(int value) { return static_cast<int>(std::to_string(value).size()); }

int RanksPerNode(const MeshReport& report) {
  const int g = report.network->ranks_per_node;
  return g > 0 ? g : report.mesh->size();
}

// How to bring the TP groups inside nodes, given why one is not.
std::string TpRemedy(const Mesh& mesh, const MeshNetwork& network) {
  const std::string tp_first = Mesh::OrderName(Mesh::kDefaultOrder);
  if (mesh.tp() > network.ranks_per_node) {
    return "put TP inside a node (tp " + std::to_string(mesh.tp()) + " is more than the " +
           std::to_string(network.ranks_per_node) + " ranks of a node: lower --tp)";
  }
  if (mesh.order()[0] != MeshAxis::kTp) return "put TP inside a node (order " + tp_first + ")";
  return "put TP inside a node (--gpus-per-node a multiple of tp " + std::to_string(mesh.tp()) +
         ")";
}

}  // namespace

MeshAdvice AdviseMesh(const Mesh& mesh, const MeshNetwork& network) {
  MeshAdvice advice;
  const std::vector<std::vector<int>> tp_groups = mesh.Groups(MeshAxis::kTp);
  const auto spans = [&](const std::vector<int>& group) {
    return network.NodesOf(group).size() > 1;
  };
  const int spanning = static_cast<int>(std::count_if(tp_groups.begin(), tp_groups.end(), spans));
  if (spanning == 0) return advice;
  const std::vector<int>& first = *std::find_if(tp_groups.begin(), tp_groups.end(), spans);
  const std::string where =
      "TP group " + GroupText(first) + " spans nodes " + NodesText(network.NodesOf(first));
  advice.warnings.push_back(
      where + " (" + std::to_string(spanning) + " of " + std::to_string(tp_groups.size()) +
      " TP groups span nodes): TP all-reduces every layer; " + TpRemedy(mesh, network));
  for (const std::vector<int>& group : mesh.Groups(MeshAxis::kPp)) {
    for (size_t k = 0; k + 1 < group.size(); ++k) {
      const int node = network.node_of(group[k]);
      if (node != network.node_of(group[k + 1])) continue;
      advice.notes.push_back("pipeline neighbours " + GroupText({group[k], group[k + 1]}) +
                             " share node " + std::to_string(node) + " while " + where +
                             ": the inverted layout (a pipeline hop sends one activation per "
                             "micro-batch, TP all-reduces every layer); order " +
                             Mesh::OrderName(Mesh::kDefaultOrder) +
                             " puts TP inside nodes and PP across them");
      return advice;
    }
  }
  return advice;
}

std::string MeshText(const MeshReport& report) {
  const Mesh& mesh = *report.mesh;
  const MeshNetwork& network = *report.network;
  const int per_node = RanksPerNode(report);
  std::ostringstream out;
  out << "mesh                " << mesh.Describe() << ", " << mesh.size() / per_node
      << (mesh.size() / per_node == 1 ? " node" : " nodes") << " of " << per_node << " ranks\n";
  // Columns as wide as their header or their widest number, whichever is wider.
  const int rank_width = std::max(4, Digits(mesh.size() - 1));
  const int axis_width =
      std::max({2, Digits(mesh.dp() - 1), Digits(mesh.tp() - 1), Digits(mesh.pp() - 1)});
  const int node_width = std::max(4, Digits(mesh.size() / per_node - 1));
  const auto row = [&](const auto& rank, const auto& dp, const auto& tp, const auto& pp,
                       const auto& node) {
    out << "  " << std::setw(rank_width) << rank << "  " << std::setw(axis_width) << dp << "  "
        << std::setw(axis_width) << tp << "  " << std::setw(axis_width) << pp << "  "
        << std::setw(node_width) << node << "  ";
  };
  row("rank", "dp", "tp", "pp", "node");
  out << "stages\n";
  for (int r = 0; r < mesh.size(); ++r) {
    const MeshCoords c = mesh.coords(r);
    row(r, c.dp, c.tp, c.pp, network.node_of(r));
    std::string stages;
    for (int s : report.layout->stages_of(c.pp)) {
      stages += (stages.empty() ? "" : " ") + std::to_string(s);
    }
    out << stages << "\n";
  }
  for (MeshAxis axis : kAxes) {
    out << "  " << Upper(axis) << " groups  ";
    for (const std::vector<int>& group : mesh.Groups(axis)) out << " " << GroupText(group);
    out << "\n";
  }
  const MeshAdvice advice = AdviseMesh(mesh, network);
  for (const std::string& w : advice.warnings) out << "warning: " << w << "\n";
  for (const std::string& n : advice.notes) out << "note: " << n << "\n";
  if (mesh.tp() == 1 && mesh.dp() == 1) return out.str();
  const ModelShape& shape = *report.shape;
  const MeshSimResult& sim = *report.sim;
  out << "links               within a node " << ReportNumber(network.intra.latency) << " s + "
      << ReportNumber(network.intra.bandwidth) << " B/s, between nodes "
      << ReportNumber(network.inter.latency) << " s + " << ReportNumber(network.inter.bandwidth)
      << " B/s\n"
      << "all-reduced bytes   activation " << ReportNumber(shape.activation_bytes())
      << " (b x T x C = " << shape.micro_batch_size << " x " << shape.seq_len << " x "
      << shape.hidden << "), stage gradients " << ReportNumber(shape.stage_param_bytes(mesh.tp()))
      << " (" << shape.layers_per_stage << (shape.layers_per_stage == 1 ? " block" : " blocks")
      << ")\n";
  if (mesh.tp() > 1) {
    out << "tp all-reduce       " << ReportList(sim.tp_time)
        << "  (per pipeline rank, in every F, I and B)\n";
  }
  if (mesh.dp() > 1) {
    char hidden[32];
    std::snprintf(hidden, sizeof hidden, "%.1f%%", 100 * sim.dp_hidden_share);
    out << "dp all-reduce       " << ReportList(sim.dp_time) << "  (per stage and pipeline rank, "
        << sim.dp_buckets << (sim.dp_buckets == 1 ? " bucket" : " buckets") << ")\n"
        << "step                " << ReportNumber(sim.step) << " with the DP all-reduce, "
        << ReportNumber(sim.step_without_dp) << " without; " << hidden << " of the "
        << ReportNumber(sim.dp_comm) << " of DP communication (all ranks) hidden\n";
  }
  return out.str();
}

nlohmann::json MeshJson(const MeshReport& report) {
  const Mesh& mesh = *report.mesh;
  const MeshNetwork& network = *report.network;
  const MeshSimResult& sim = *report.sim;
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < mesh.size(); ++r) {
    const MeshCoords c = mesh.coords(r);
    ranks.push_back({{"rank", r},
                     {"dp", c.dp},
                     {"tp", c.tp},
                     {"pp", c.pp},
                     {"node", network.node_of(r)},
                     {"stages", report.layout->stages_of(c.pp)}});
  }
  nlohmann::json groups;
  for (MeshAxis axis : kAxes) groups[std::string(MeshAxisName(axis))] = mesh.Groups(axis);
  const MeshAdvice advice = AdviseMesh(mesh, network);
  const int per_node = RanksPerNode(report);
  return {
      {"order", Mesh::OrderName(mesh.order())},
      {"dp", mesh.dp()},
      {"tp", mesh.tp()},
      {"pp", mesh.pp()},
      {"ranks_per_node", per_node},
      {"nodes", mesh.size() / per_node},
      {"ranks", ranks},
      {"groups", groups},
      {"warnings", advice.warnings},
      {"notes", advice.notes},
      {"activation_bytes", report.shape->activation_bytes()},
      {"stage_param_bytes", report.shape->stage_param_bytes(mesh.tp())},
      {"tp_time", sim.tp_time},
      {"dp_time", sim.dp_time},
      {"dp_buckets", sim.dp_buckets},
      {"step", sim.step},
      {"step_without_dp", sim.step_without_dp},
      {"dp_comm", sim.dp_comm},
      {"dp_exposed", sim.dp_exposed},
      {"dp_hidden_share", sim.dp_hidden_share},
  };
}

}  // namespace conveyor
