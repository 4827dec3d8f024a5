// ChangedGroups (state/changed_groups.hpp): each group once per take, in marking order,
// forgotten once taken, and groups outside the range ignored.
#include <catch2/catch.hpp>

#include <vector>

#include "state/changed_groups.hpp"

using streamctl::state::ChangedGroups;

TEST_CASE("changed groups are taken once each, in marking order, then forgotten", "[changed_groups]") {
  ChangedGroups changed({8, 16});
  changed.mark(9);
  changed.mark(12);
  changed.mark(9);
  std::vector<std::uint32_t> taken;
  changed.take(taken);
  CHECK(taken == std::vector<std::uint32_t>{9, 12});
  taken.clear();
  changed.take(taken);
  CHECK(taken.empty());
  changed.mark(12); // marked again after a take: taken again
  changed.take(taken);
  CHECK(taken == std::vector<std::uint32_t>{12});
}

TEST_CASE("groups outside the range are not marked", "[changed_groups]") {
  ChangedGroups changed({8, 16});
  changed.mark(7);
  changed.mark(16);
  std::vector<std::uint32_t> taken;
  changed.take(taken);
  CHECK(taken.empty());
  ChangedGroups none;
  none.mark(0);
  none.take(taken);
  CHECK(taken.empty());
}

TEST_CASE("mark_all marks every group of the range", "[changed_groups]") {
  ChangedGroups changed({3, 6});
  changed.mark(4);
  changed.mark_all();
  std::vector<std::uint32_t> taken;
  changed.take(taken);
  CHECK(taken == std::vector<std::uint32_t>{4, 3, 5});
}
