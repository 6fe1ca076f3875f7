// Test helpers for the zero-bubble family's builders (header-only; *_test.cc only).
#ifndef CONVEYOR_SCHEDULE_BUILDERS_ZB_TESTING_H_
#define CONVEYOR_SCHEDULE_BUILDERS_ZB_TESTING_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "conveyor/common/error.h"
#include "conveyor/schedule/activation_memory.h"
#include "conveyor/schedule/lower.h"
#include "conveyor/schedule/program.h"
#include "conveyor/schedule/verify.h"

namespace conveyor {

// What every builder of this family promises, on any layout: a compute-only program that
// Verify() accepts (each (stage, micro-batch) has its F and its B or I and W, in order, on
// its stage's rank), that Lower() lowers without deadlock into a program Verify() accepts
// too, and whose peak in flight on every rank is at most `max_in_flight`.
inline void ExpectSoundZbProgram(const Program& program, int max_in_flight,
                                 const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_FALSE(program.has_comms());
  const std::vector<Finding> findings = Verify(program);
  EXPECT_TRUE(findings.empty()) << FormatFindings(findings) << program.ToText();
  try {
    const std::vector<Finding> lowered = Verify(Lower(program));
    EXPECT_TRUE(lowered.empty()) << FormatFindings(lowered);
  } catch (const Error& e) {
    ADD_FAILURE() << "Lower() threw: " << e.what() << "\n" << program.ToText();
  }
  const std::vector<int> peaks = PeakInFlight(program);
  EXPECT_LE(*std::max_element(peaks.begin(), peaks.end()), max_in_flight) << program.ToText();
}

}  // namespace conveyor

#endif  // CONVEYOR_SCHEDULE_BUILDERS_ZB_TESTING_H_
