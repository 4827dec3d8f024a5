#pragma once
// `streamctl snapshot inspect|verify` (streamctl-snapshot(1)): read snapshot files
// (state/snapshot_format.hpp) without running anything.

namespace CLI {
class App;
}

namespace streamctl::cli {

struct Context;

// Registers `snapshot` with its `inspect` and `verify` subcommands; they set ctx.exit_code
// (3, ErrorKind::Snapshot, when a file is missing, truncated or corrupt).
void add_snapshot_command(CLI::App& app, Context& ctx);

} // namespace streamctl::cli
