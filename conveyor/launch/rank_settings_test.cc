#include "conveyor/launch/rank_settings.h"

#include <gtest/gtest.h>

namespace conveyor {
namespace {

TEST(RankSettingsTest, SettingsRoundTripThroughTheirText) {
  const RankSettings settings = {{"--seed", "1234"}, {"--data", "0.7 a=b 0.3 c"}, {"--x", ""}};
  EXPECT_EQ(DecodeRankSettings(EncodeRankSettings(settings)), settings);
  EXPECT_EQ(DecodeRankSettings(EncodeRankSettings({{"--a", "two\nlines"}})),
            (RankSettings{{"--a", "two lines"}}));
}

TEST(RankSettingsTest, AgreeingRanksSayNothing) {
  const RankSettings same = {{"--seed", "1"}, {"world size", "3"}};
  EXPECT_EQ(RankDisagreement({same, same, same}), "");
  EXPECT_EQ(RankDisagreement({same}), "");
}

TEST(RankSettingsTest, EverySettingThatDiffersIsNamedWithItsValuesAndRanks) {
  const RankSettings base = {{"--seed", "1234"}, {"--lr", "0.003"}, {"--schedule", "1f1b"}};
  RankSettings stale = base;
  stale[0].second = "99";
  stale[2].second = "gpipe";
  EXPECT_EQ(RankDisagreement({base, stale, base, base}),
            "--seed is 1234 on ranks 0, 2, 3 and 99 on rank 1; --schedule is 1f1b on ranks 0, "
            "2, 3 and gpipe on rank 1");
  RankSettings third = base;
  third[0].second = "7";
  EXPECT_EQ(RankDisagreement({base, stale, third}),
            "--seed is 1234 on rank 0, 99 on rank 1 and 7 on rank 2; --schedule is 1f1b on "
            "ranks 0, 2 and gpipe on rank 1");
  // A setting one rank lacks (an older binary), and an empty value.
  RankSettings older = {{"--seed", "1234"}, {"--lr", "0.003"}};
  RankSettings empty = base;
  empty[2].second = "";
  EXPECT_EQ(RankDisagreement({base, older}), "--schedule is 1f1b on rank 0 and (none) on rank 1");
  EXPECT_EQ(RankDisagreement({base, empty}), "--schedule is 1f1b on rank 0 and \"\" on rank 1");
}

}  // namespace
}  // namespace conveyor
