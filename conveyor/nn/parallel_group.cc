#include "conveyor/nn/parallel_group.h"

#include "conveyor/common/error.h"

namespace conveyor {

void CheckParallelGroup(std::string_view kind, std::string_view abbreviation, int size, int rank,
                        const Transport* group) {
  CONVEYOR_CHECK(size >= 1) << "the " << kind << " size must be at least 1, got " << size;
  CONVEYOR_CHECK(rank >= 0 && rank < size)
      << kind << " rank " << rank << " is outside [0, " << size << ")";
  CONVEYOR_CHECK(size == 1 || group != nullptr) << kind << " size " << size << " needs the "
                                                << abbreviation << " group's transport, got none";
  if (group != nullptr) {
    CONVEYOR_CHECK(group->world_size() == size && group->rank() == rank)
        << "the " << kind << " group is rank " << group->rank() << " of " << group->world_size()
        << ", but the model is built for rank " << rank << " of " << size;
  }
}

}  // namespace conveyor
