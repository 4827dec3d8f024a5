#include "pipeline/spec/cluster_spec.hpp"

namespace streamctl::pipeline {

namespace {

ClusterHost host_entry(const toml::node& entry) {
  ClusterHost h;
  if (auto s = entry.as_string()) {
    h.name = s->get();
  } else if (auto t = entry.as_table()) {
    h.name = (*t)["host"].value_or(std::string());
    if (auto slots = (*t)["slots"].value<std::int64_t>()) h.slots = static_cast<int>(*slots);
  }
  h.address = std::string(host_address(h.name));
  if (auto at = h.name.find('@'); at != std::string::npos) h.user = h.name.substr(0, at);
  return h;
}

} // namespace

ClusterSpec cluster_of(const PipelineSpec& spec) {
  ClusterSpec c;
  const toml::table* cluster = spec.root.get_as<toml::table>("cluster");
  if (cluster) {
    if (auto hosts = cluster->get_as<toml::array>("hosts"))
      for (const auto& entry : *hosts)
        c.hosts.push_back(host_entry(entry));
    std::string launcher =
        (*cluster)["launcher"].value_or(std::string(c.hosts.empty() ? "local" : "ssh"));
    c.launcher = launcher == "ssh"     ? LauncherKind::Ssh
                 : launcher == "slurm" ? LauncherKind::Slurm
                                       : LauncherKind::Local;
    if (auto options = cluster->get_as<toml::array>("ssh_options"))
      for (const auto& o : *options)
        c.ssh_options.push_back(o.value_or(std::string()));
    c.binary = (*cluster)["binary"].value_or(std::string());
    c.ship_binary = (*cluster)["ship_binary"].value_or(false);
    c.encrypt = (*cluster)["encrypt"].value_or(true);
    if (auto nodes = (*cluster)["nodes"].value<std::int64_t>()) c.nodes = static_cast<int>(*nodes);
    if (auto options = cluster->get_as<toml::array>("slurm_options"))
      for (const auto& o : *options)
        c.slurm_options.push_back(o.value_or(std::string()));
  }
  // Validation allows hosts only with the ssh launcher.
  if (c.launcher == LauncherKind::Local) c.hosts.clear();
  c.storage = c.launcher == LauncherKind::Local ? CheckpointStorage::Shared
                                                : CheckpointStorage::Coordinator;
  if (auto storage = spec.root["checkpoint"]["storage"].value<std::string>())
    c.storage =
        *storage == "coordinator" ? CheckpointStorage::Coordinator : CheckpointStorage::Shared;
  return c;
}

const char* launcher_name(LauncherKind launcher) {
  switch (launcher) {
  case LauncherKind::Local: return "local";
  case LauncherKind::Ssh: return "ssh";
  case LauncherKind::Slurm: return "slurm";
  }
  return "?";
}

const char* storage_name(CheckpointStorage storage) {
  switch (storage) {
  case CheckpointStorage::Coordinator: return "coordinator";
  case CheckpointStorage::Shared: return "shared";
  }
  return "?";
}

std::string_view host_address(std::string_view host_name) {
  auto at = host_name.find('@');
  return at == std::string_view::npos ? host_name : host_name.substr(at + 1);
}

bool pin_names_host(std::string_view pin, std::string_view host_name) {
  return pin == host_name || pin == host_address(host_name);
}

} // namespace streamctl::pipeline
