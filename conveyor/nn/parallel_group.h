// The checks every model-parallel group of a layer shares (tensor_parallel.h's TP group,
// context_parallel.h's CP group): the sizes a model is built for agree with the group it is
// handed.
#ifndef CONVEYOR_NN_PARALLEL_GROUP_H_
#define CONVEYOR_NN_PARALLEL_GROUP_H_

#include <string_view>

#include "conveyor/comm/transport.h"

namespace conveyor {

// Throws UserError naming the values unless size >= 1, rank is in [0, size), a group is given
// when size > 1, and any group given has that size and rank. `kind` names the parallelism in
// the messages ("tensor-parallel"), `abbreviation` its group ("TP").
void CheckParallelGroup(std::string_view kind, std::string_view abbreviation, int size, int rank,
                        const Transport* group);

}  // namespace conveyor

#endif  // CONVEYOR_NN_PARALLEL_GROUP_H_
