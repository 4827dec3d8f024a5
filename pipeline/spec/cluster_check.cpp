#include "pipeline/spec/cluster_check.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include "pipeline/spec/cluster_spec.hpp"

namespace streamctl::pipeline::detail {

namespace {

KeySchema key(std::string name, KeyType type) {
  KeySchema k;
  k.name = std::move(name);
  k.type = type;
  return k;
}

// `launcher` and `hosts` are checked by hand: their messages say more than a schema's.
const std::vector<KeySchema>& cluster_keys() {
  static const std::vector<KeySchema> keys = {
      key("ssh_options", KeyType::StringArray),
      key("binary", KeyType::String),
      key("ship_binary", KeyType::Bool),
      key("encrypt", KeyType::Bool),
      key("nodes", KeyType::Int),
      key("slurm_options", KeyType::StringArray),
  };
  return keys;
}

const std::vector<std::string> launcher_choices = {"local", "ssh", "slurm"};

// A host entry goes to ssh as its destination argument: a leading '-' would make it an option,
// and blanks would split it.
std::string bad_host_name(const std::string& name) {
  if (name.empty()) return "must not be empty";
  if (name.front() == '-') return "must not start with '-'";
  if (std::any_of(name.begin(), name.end(), [](unsigned char ch) { return std::isspace(ch); }))
    return "must not hold blanks";
  auto at = name.find('@');
  if (at != std::string::npos &&
      (at == 0 || at + 1 == name.size() || name.find('@', at + 1) != std::string::npos))
    return "must be HOST or USER@HOST, got '" + name + "'";
  return {};
}

// Checks each entry of `hosts`; returns the valid ones with their positions.
std::vector<std::pair<std::string, SourcePos>> check_hosts(Checker& c, const toml::node& hosts,
                                                           const Owner& owner, bool& reported) {
  std::vector<std::pair<std::string, SourcePos>> valid;
  auto array = hosts.as_array();
  if (!array) {
    c.type_error(hosts, "cluster.hosts", "array");
    reported = true;
    return valid;
  }
  for (std::size_t k = 0; k < array->size(); ++k) {
    const toml::node& h = (*array)[k];
    std::string path = "cluster.hosts[" + std::to_string(k) + "]";
    const toml::node* name = nullptr;
    if (h.is_string()) {
      name = &h;
    } else if (auto t = h.as_table()) {
      KeySchema host_key = key("host", KeyType::String);
      host_key.required = true;
      c.check_table(*t, {host_key, key("slots", KeyType::Int)}, {}, owner.nested(path), path + ".");
      if (auto slots = t->get("slots"); slots && slots->is_integer())
        c.int_at_least(*slots, path + ".slots", 1);
      path += ".host";
      if (auto n = t->get("host"); n && n->is_string())
        name = n;
      else
        reported = true; // a host without a name: pins cannot be judged
    } else {
      c.type_error(h, path, "string or a table like { host = \"h\", slots = 4 }");
      reported = true;
    }
    if (!name) continue;
    const std::string& text = name->as_string()->get();
    if (auto problem = bad_host_name(text); !problem.empty()) {
      c.error(c.pos(*name), "'" + path + "' " + problem);
      reported = true;
      continue;
    }
    valid.emplace_back(text, c.pos(*name));
  }
  return valid;
}

// The same address twice would count its slots twice: a host's capacity is its slots.
void check_duplicates(Checker& c, const std::vector<std::pair<std::string, SourcePos>>& hosts) {
  std::map<std::string, const std::pair<std::string, SourcePos>*> first;
  for (const auto& h : hosts) {
    std::string address(host_address(h.first));
    auto [it, inserted] = first.emplace(address, &h);
    if (inserted) continue;
    const SourcePos& was = it->second->second;
    c.error(h.second, "host '" + address + "' is listed twice in [cluster] hosts (first as '" +
                          it->second->first + "' at line " + std::to_string(was.line) +
                          "): list each host once, with { host = \"" + address +
                          "\", slots = N } for more workers on it");
  }
}

// `nodes` and `slurm_options` shape the allocation the slurm launcher makes outside one; other
// launchers ignore them (so that `run --launcher local` runs a Slurm pipeline as it is). Each
// option goes to salloc as one argument before its command: anything but an option
// ("--partition=x", "-p") would be taken for the command.
void check_slurm_keys(Checker& c, const toml::table& cluster) {
  if (auto nodes = cluster.get("nodes"); nodes && nodes->is_integer())
    c.int_at_least(*nodes, "cluster.nodes", 1);
  auto options = cluster.get_as<toml::array>("slurm_options");
  if (!options) return;
  for (std::size_t k = 0; k < options->size(); ++k) {
    auto s = (*options)[k].as_string();
    if (!s) continue; // the schema reported it
    const std::string& text = s->get();
    std::string path = "'cluster.slurm_options[" + std::to_string(k) + "]'";
    if (text.size() < 2 || text.front() != '-' || text == "--")
      c.error(c.pos((*options)[k]),
              path + " must be a salloc option like \"--partition=debug\" or \"-pdebug\", got '" +
                  text + "' (an option and its value go in one entry, joined by '=')");
  }
}

} // namespace

ClusterDraft check_cluster(Checker& c, const toml::table* cluster) {
  ClusterDraft d;
  if (!cluster) return d;
  Owner owner = Owner{}.nested("cluster");
  c.check_table(*cluster, cluster_keys(), {"launcher", "hosts"}, owner, "cluster.", {"agents"});

  if (auto agents = cluster->find("agents"); agents != cluster->end())
    c.error(c.pos(agents->first), "'agents' is not supported now (streamctl agent daemons are not "
                                  "part of SPEC §9): list the machines in 'hosts' and start "
                                  "workers on them with launcher = \"ssh\"");

  std::vector<std::pair<std::string, SourcePos>> hosts;
  const toml::node* hosts_node = cluster->get("hosts");
  if (hosts_node) {
    hosts = check_hosts(c, *hosts_node, owner, d.hosts_reported);
    check_duplicates(c, hosts);
  }
  bool has_hosts = !hosts.empty() || d.hosts_reported;

  const toml::node* launcher = cluster->get("launcher");
  d.launcher = has_hosts ? "ssh" : "local";
  if (launcher) {
    auto s = launcher->as_string();
    if (!s) {
      c.type_error(*launcher, "cluster.launcher", "string");
      d.launcher.clear();
    } else if (s->get() == "agent") {
      c.error(c.pos(*launcher), "launcher = \"agent\" is not supported now: use \"ssh\" (hosts you "
                                "can ssh into) or \"slurm\" (inside a Slurm allocation)");
      d.launcher.clear();
    } else {
      d.launcher = c.enum_value(*launcher, "cluster.launcher", launcher_choices).value_or("");
    }
  }

  if (d.launcher == "ssh" && !has_hosts) {
    c.error(launcher ? c.pos(*launcher) : c.pos(*cluster),
            "launcher = \"ssh\" needs 'hosts': the hosts to start workers on over ssh, like "
            "hosts = [\"worker1\", \"ops@worker2\"]");
  } else if (has_hosts && hosts_node && (d.launcher == "local" || d.launcher == "slurm")) {
    std::string why =
        d.launcher == "local"
            ? "every worker runs on this host: remove 'hosts', or use launcher = \"ssh\""
            : "workers run on the nodes of the Slurm allocation: remove 'hosts'";
    c.error(c.pos(*hosts_node),
            "'hosts' is not used with launcher = \"" + d.launcher + "\" (" + why + ")");
  }

  if (auto ship = cluster->get("ship_binary"); ship && ship->value_or(false)) {
    if (auto binary = cluster->get("binary"))
      c.error(c.pos(*binary), "'binary' and ship_binary = true contradict each other: shipped, "
                              "the coordinator's own binary runs from a cache directory on each "
                              "host; remove one of them");
  }
  if (auto binary = cluster->get("binary");
      binary && binary->is_string() && binary->as_string()->get().empty())
    c.error(c.pos(*binary), "'cluster.binary' must not be empty");

  check_slurm_keys(c, *cluster);

  for (auto& h : hosts)
    d.hosts.push_back(std::move(h.first));
  return d;
}

void check_host_pins(Checker& c, const ClusterDraft& cluster, const std::vector<NodeDraft>& nodes) {
  if (cluster.launcher != "ssh" && cluster.launcher != "local") return; // slurm, or reported
  if (cluster.hosts_reported) return;
  for (const auto& n : nodes) {
    const std::string& pin = n.spec.host;
    if (pin.empty()) continue;
    std::string what = std::string(role_name(n.spec.role)) + " '" + n.spec.name + "'";
    if (cluster.hosts.empty()) {
      c.error(n.host_where, what + " pins itself to host '" + pin +
                                "', but [cluster] lists no hosts: every worker runs on this host; "
                                "remove 'host', or list the hosts in [cluster] hosts");
      continue;
    }
    bool known = std::any_of(cluster.hosts.begin(), cluster.hosts.end(),
                             [&](const std::string& h) { return pin_names_host(pin, h); });
    if (known) continue;
    std::vector<std::string> listed; // once each: a host listed twice was reported
    for (const auto& h : cluster.hosts)
      if (std::find(listed.begin(), listed.end(), h) == listed.end()) listed.push_back(h);
    std::vector<std::string> candidates = listed;
    for (const auto& h : listed)
      candidates.emplace_back(host_address(h));
    std::string hint = did_you_mean(pin, candidates);
    c.error(n.host_where, "unknown host '" + pin + "' in 'host' of " + what + "; " +
                              (hint.empty() ? "" : hint + " ") + "valid: " + join(listed) +
                              " (an entry of [cluster] hosts as written, or its part after '@')");
  }
}

} // namespace streamctl::pipeline::detail
