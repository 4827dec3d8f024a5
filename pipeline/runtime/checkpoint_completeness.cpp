#include "pipeline/runtime/checkpoint_completeness.hpp"

#include <map>
#include <set>

namespace streamctl::runtime {

namespace {

std::string chain_name(const std::vector<std::string>& nodes) {
  std::string out;
  for (const auto& n : nodes) out += (out.empty() ? "" : " -> ") + n;
  return "chain '" + out + "'";
}

struct Chain {
  int parallelism = 0;
  std::size_t first = 0;              // the first entry's index in the tasks
  std::vector<const std::string*> by_subtask; // the file of each subtask seen, or nullptr
};

} // namespace

Result<void> check_chains_complete(const CheckpointMetadata& m, const std::string& file) {
  auto bad = [&](const std::string& what) { return fail(file + ": " + what); };
  std::map<std::string, std::size_t> files;
  std::map<std::vector<std::string>, Chain> chains;
  std::map<std::string, const std::vector<std::string>*> chain_of_node;
  for (std::size_t k = 0; k < m.tasks.size(); ++k) {
    const CheckpointTaskFile& t = m.tasks[k];
    if (auto [it, fresh] = files.emplace(t.file, k); !fresh)
      return bad("task file '" + t.file + "' is listed twice (tasks " + std::to_string(it->second) + " and " +
                 std::to_string(k) + ")");
    auto [it, fresh] = chains.try_emplace(t.nodes);
    Chain& c = it->second;
    if (fresh) {
      c.parallelism = t.parallelism;
      c.first = k;
      c.by_subtask.assign(static_cast<std::size_t>(t.parallelism), nullptr);
      std::set<std::string> seen;
      for (const auto& node : t.nodes) {
        if (!seen.insert(node).second) return bad("node '" + node + "' appears twice in " + chain_name(t.nodes));
        if (auto [other, first_time] = chain_of_node.emplace(node, &it->first); !first_time)
          return bad("node '" + node + "' is in two chains: " + chain_name(*other->second) + " and " +
                     chain_name(t.nodes));
      }
    } else if (t.parallelism != c.parallelism) {
      return bad(chain_name(t.nodes) + ": its entries disagree on parallelism (" + std::to_string(c.parallelism) +
                 " for '" + m.tasks[c.first].file + "', " + std::to_string(t.parallelism) + " for '" + t.file + "')");
    }
    const std::string*& slot = c.by_subtask[static_cast<std::size_t>(t.subtask)];
    if (slot)
      return bad(chain_name(t.nodes) + " lists subtask " + std::to_string(t.subtask) + " twice ('" + *slot +
                 "' and '" + t.file + "')");
    slot = &t.file;
  }
  for (const auto& [nodes, c] : chains)
    for (std::size_t s = 0; s < c.by_subtask.size(); ++s)
      if (!c.by_subtask[s])
        return bad(chain_name(nodes) + " has parallelism " + std::to_string(c.parallelism) +
                   " but no entry for subtask " + std::to_string(s) +
                   ": the snapshot is incomplete (that task's state and input position would be lost)");
  if (m.version >= 2 && chains.size() != static_cast<std::size_t>(m.chains))
    return bad("the tasks form " + std::to_string(chains.size()) + " chain(s), but chains = " +
               std::to_string(m.chains) + ": the snapshot is incomplete");
  return {};
}

Result<void> check_chain_ids(const CheckpointMetadata& m, const std::vector<std::uint32_t>& chain_ids,
                             const std::string& dir) {
  std::map<std::vector<std::string>, std::size_t> id_of_chain; // nodes -> first task
  std::map<std::uint32_t, std::size_t> chain_of_id;             // id -> first task
  for (std::size_t k = 0; k < m.tasks.size() && k < chain_ids.size(); ++k) {
    const CheckpointTaskFile& t = m.tasks[k];
    auto [known, fresh] = id_of_chain.emplace(t.nodes, k);
    if (!fresh) {
      if (chain_ids[known->second] != chain_ids[k])
        return fail(dir + "/" + t.file + ": chain id " + std::to_string(chain_ids[k]) + " in its header, but '" +
                    m.tasks[known->second].file + "' of the same " + chain_name(t.nodes) + " says " +
                    std::to_string(chain_ids[known->second]));
      continue;
    }
    if (auto [other, first_time] = chain_of_id.emplace(chain_ids[k], k); !first_time)
      return fail(dir + "/" + t.file + ": chain id " + std::to_string(chain_ids[k]) + " in its header is also that of '" +
                  m.tasks[other->second].file + "', of another chain");
  }
  std::uint32_t expected = 0;
  for (const auto& [id, task] : chain_of_id) {
    if (id != expected)
      return fail(dir + ": no task file of chain " + std::to_string(expected) + " (the headers name chains up to " +
                  std::to_string(chain_of_id.rbegin()->first) + "): the snapshot is incomplete");
    ++expected;
  }
  return {};
}

} // namespace streamctl::runtime
