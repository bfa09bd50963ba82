// DirectMapped: the one-probe table in front of the agent's address-keyed
// caches. A slot answers only for the key it holds; a key that maps to the
// same slot replaces it; clear() forgets everything.

#include <gtest/gtest.h>

#include <array>

#include "core/util/direct_mapped.h"

namespace {

using meshscope::DirectMapped;

TEST(DirectMapped, AnswersOnlyForTheKeyItHolds) {
    // 4-byte objects: keys[0] and keys[32] are 128 bytes apart, the same slot
    // of 8 ((address >> 4) % 8); keys[4] is the next slot
    alignas(128) std::array<int, 64> keys{};
    int value = 7, other = 8;
    DirectMapped<int, int, 8> table;
    EXPECT_EQ(table.find(&keys[0]), nullptr);
    table.remember(&keys[0], &value);
    EXPECT_EQ(table.find(&keys[0]), &value);
    EXPECT_EQ(table.find(&keys[1]), nullptr);  // same slot, another key

    table.remember(&keys[4], &other);  // another slot: both kept
    EXPECT_EQ(table.find(&keys[4]), &other);
    EXPECT_EQ(table.find(&keys[0]), &value);

    table.remember(&keys[32], &other);  // keys[0]'s slot: it is replaced
    EXPECT_EQ(table.find(&keys[32]), &other);
    EXPECT_EQ(table.find(&keys[0]), nullptr);

    table.clear();
    EXPECT_EQ(table.find(&keys[32]), nullptr);
    EXPECT_EQ(table.find(&keys[4]), nullptr);
}

}  // namespace
