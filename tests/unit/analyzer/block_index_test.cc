// BlockIndex must answer every lookup as a plain multimap of (address, node) entries would, through growth and
// backward-shift deletion, with several entries at one address (overlapping segments of a damaged trace) told
// apart by the lookup's predicate. The layer keeps the blocks those nodes name in a ChunkedVector, whose elements
// must never move.
#include "analyzer/model/torch/block_index.h"

#include "analyzer/model/chunked_vector.h"

#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace cumemtrace::analyzer {
namespace {

TEST(BlockIndex, AnswersAsAMultimapWould) {
  for (uint64_t round = 0; round < 20; ++round) {
    std::mt19937_64 rng(round);
    BlockIndex index;
    std::set<std::pair<uint64_t, uint32_t>> reference;  // (address, node)
    // Few distinct addresses (512-byte steps, as PyTorch's blocks), so that probe chains meet and wrap; every
    // tenth entry shares an address with another.
    const uint64_t base = 0x7f0000000000ull + (rng() % 1024) * (uint64_t{2} << 20);
    uint32_t next_node = 0;
    std::vector<std::pair<uint64_t, uint32_t>> live;
    for (int op = 0; op < 20000; ++op) {
      const uint64_t r = rng() % 10;
      if (r < 5 || live.empty()) {
        const uint64_t address = (r == 0 && !live.empty()) ? live[rng() % live.size()].first
                                                           : base + (rng() % 4096) * 512;
        const uint32_t node = next_node++;
        index.Insert(address, node);
        reference.insert({address, node});
        live.push_back({address, node});
      } else if (r < 8) {
        const size_t k = rng() % live.size();
        EXPECT_TRUE(index.Erase(live[k].first, live[k].second));
        reference.erase(live[k]);
        live[k] = live.back();
        live.pop_back();
      } else {
        EXPECT_FALSE(index.Erase(base + (rng() % 4096) * 512, next_node + 1));  // no such entry
      }
      ASSERT_EQ(index.size(), reference.size());
      // A lookup of a random address for each node it holds, and for one it does not.
      const uint64_t address = rng() % 2 == 0 && !live.empty() ? live[rng() % live.size()].first
                                                                : base + (rng() % 4096) * 512;
      for (auto it = reference.lower_bound({address, 0}); it != reference.end() && it->first == address; ++it) {
        const uint32_t want = it->second;
        ASSERT_EQ(index.Find(address, [&](uint32_t n) { return n == want; }), want);
      }
      ASSERT_EQ(index.Find(address, [&](uint32_t n) { return n == next_node; }), BlockIndex::kNone);
    }
    // Every entry is found at the end, after all the growth and deletions.
    for (const auto& [address, node] : reference) {
      ASSERT_EQ(index.Find(address, [&](uint32_t n) { return n == node; }), node);
    }
  }
}

TEST(ChunkedVector, ElementsKeepTheirPlaceAndValues) {
  struct Node {
    uint64_t a = 7;
    uint32_t b = 9;
  };
  ChunkedVector<Node, 2> nodes;  // chunks of 4: many growths
  std::vector<const Node*> places;
  for (uint64_t i = 0; i < 1000; ++i) {
    Node& added = nodes.emplace_back();
    EXPECT_EQ(added.a, 7u);
    EXPECT_EQ(added.b, 9u);
    added.a = i;
    places.push_back(&added);
  }
  ASSERT_EQ(nodes.size(), 1000u);
  for (uint64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(&nodes[i], places[i]) << i;
    EXPECT_EQ(nodes[i].a, i);
  }
}

}  // namespace
}  // namespace cumemtrace::analyzer
