// Stack interning: a prefix tree whose paths give back exactly the stacks put in, sharing common outer frames.
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "preload/stack_table.h"

namespace cumemtrace::preload {
namespace {

std::vector<uintptr_t> Walk(const StackTable& t, uint64_t id) {
  std::vector<uintptr_t> pcs;
  for (; id != 0; id = t.parent(id)) pcs.push_back(t.pc(id));
  return pcs;
}

TEST(StackTable, SharesPrefixesAndReturnsSameIdForSameStack) {
  StackTable t;
  const uintptr_t a[] = {30, 20, 10};
  const uintptr_t b[] = {31, 20, 10};
  uint64_t id_a = t.Intern(a, 3);
  uint64_t id_b = t.Intern(b, 3);
  EXPECT_NE(id_a, id_b);
  EXPECT_EQ(t.node_count(), 4u);  // 10, 20 shared; 30 and 31
  EXPECT_EQ(t.Intern(a, 3), id_a);
  EXPECT_EQ(t.node_count(), 4u);
  // A stack that is a suffix-path of another (its outer frames) is an inner node of the tree.
  const uintptr_t outer[] = {20, 10};
  EXPECT_EQ(t.Intern(outer, 2), t.parent(id_a));
  EXPECT_EQ(t.Intern(a, 0), 0u);
  EXPECT_EQ(t.first_pending(), 1u);
  EXPECT_EQ(t.next_id(), 5u);
  t.MarkWritten();
  EXPECT_EQ(t.first_pending(), 5u);
  t.Reset();
}

TEST(StackTable, ManyRandomStacksRoundTrip) {
  StackTable t;
  std::mt19937_64 rng(7);
  std::vector<std::vector<uintptr_t>> stacks;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 20000; ++i) {
    std::vector<uintptr_t> s(1 + rng() % 40);
    for (auto& pc : s) pc = 0x400000 + rng() % 64;  // few distinct pcs: lots of sharing and cache hits
    stacks.push_back(s);
    ids.push_back(t.Intern(s.data(), static_cast<int>(s.size())));
  }
  for (size_t i = 0; i < stacks.size(); ++i) {
    ASSERT_EQ(Walk(t, ids[i]), stacks[i]) << i;
    ASSERT_EQ(t.Intern(stacks[i].data(), static_cast<int>(stacks[i].size())), ids[i]) << i;
  }
  t.Reset();
}

// Stacks with the same frames in another order, or one frame apart, are different stacks whatever the cache says.
TEST(StackTable, PermutedAndNearStacksStayDistinct) {
  StackTable t;
  const uintptr_t a[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const uintptr_t b[] = {5, 6, 7, 8, 1, 2, 3, 4, 9};  // lanes swapped
  const uintptr_t c[] = {1, 2, 3, 4, 5, 6, 7, 8, 10};
  const uint64_t ids[] = {t.Intern(a, 9), t.Intern(b, 9), t.Intern(c, 9)};
  EXPECT_NE(ids[0], ids[1]);
  EXPECT_NE(ids[0], ids[2]);
  EXPECT_NE(ids[1], ids[2]);
  EXPECT_EQ(t.Intern(b, 9), ids[1]);
  EXPECT_EQ(t.Intern(c, 9), ids[2]);
  EXPECT_EQ(t.Intern(a, 9), ids[0]);
  EXPECT_EQ(Walk(t, ids[1]), std::vector<uintptr_t>(b, b + 9));
}

// Past its cap the whole-stack cache keeps no more stacks: every stack still interns to its own path.
TEST(StackTable, StacksPastTheCacheCapInternExactly) {
  StackTable t(/*max_cached_words=*/100);
  std::mt19937_64 rng(11);
  std::vector<std::vector<uintptr_t>> stacks;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 500; ++i) {
    std::vector<uintptr_t> s(1 + rng() % 30);
    for (auto& pc : s) pc = 0x400000 + rng() % 16;
    stacks.push_back(s);
    ids.push_back(t.Intern(s.data(), static_cast<int>(s.size())));
  }
  for (size_t i = 0; i < stacks.size(); ++i) {
    ASSERT_EQ(Walk(t, ids[i]), stacks[i]) << i;
    ASSERT_EQ(t.Intern(stacks[i].data(), static_cast<int>(stacks[i].size())), ids[i]) << i;
  }
}

}  // namespace
}  // namespace cumemtrace::preload
