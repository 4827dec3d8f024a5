#pragma once
// A job's entry under the state dir (SPEC §10): STATE_DIR/jobs/JOB_ID/ with job.json (name,
// state, pids, times) and pipeline.toml (the pipeline as it runs, after --set), which the
// workers read.

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/runtime/metrics_view.hpp"
#include "pipeline/spec/pipeline_spec.hpp"

namespace streamctl::runtime {

class JobRegistration {
public:
  // Creates the job's directory; throws streamctl::Error(Usage) when the state dir cannot be
  // written.
  // `reuse_id`: the id of a job being restarted (`streamctl restart`), whose directory exists;
  // empty: a new id.
  JobRegistration(const std::filesystem::path& state_dir, const pipeline::PipelineSpec& spec,
                  const std::string& reuse_id = {});
  // Removes the socket directory, and the job directory too when this registration created it
  // and never wrote job.json (the job failed before it was visible to `list`): no path out of
  // a run, an exception included, leaves either behind.
  ~JobRegistration();
  JobRegistration(const JobRegistration&) = delete;
  JobRegistration& operator=(const JobRegistration&) = delete;

  const std::string& id() const { return id_; }
  const std::filesystem::path& dir() const { return dir_; }
  // Where ipc:// sockets go: inside the job directory unless that path is too long for a
  // Unix socket name (107 bytes), else a private $TMPDIR/streamctl-XXXXXX (or under /tmp),
  // whose length does not depend on the job's name.
  const std::filesystem::path& socket_dir() const { return socket_dir_; }

  // pipeline.toml: the text as written; overrides: the --set values, NUL-terminated;
  // variables: the values its ${NAME} took (LoadedJob::variables), "NAME=VALUE" each
  // NUL-terminated, so that `restart`, a worker and completion expand it as the run did.
  void write_pipeline(const std::string& text, const std::vector<std::string>& overrides,
                      const std::map<std::string, std::string>& variables = {}) const;
  // run_options: the flags of `run` that `restart JOB` must use again, one "name=value" a
  // line (transport, savepoint_on_exit, allow_non_restored_state).
  void write_run_options(const std::vector<std::pair<std::string, std::string>>& options) const;
  // The coordinator's control socket, written into job.json for `streamctl status|stop|cancel`.
  void set_control_endpoint(std::string endpoint) { control_endpoint_ = std::move(endpoint); }
  // The latest completed checkpoint or savepoint, written into job.json for `list` and
  // `restart JOB`.
  void set_last_checkpoint(std::string path) { last_checkpoint_ = std::move(path); }
  // Rewrites job.json atomically (temp file, rename). A pid of 0 is a worker that has exited.
  void update(const std::string& state, const std::map<std::string, int>& pids);
  // What `status` shows of an ended job: its operators' last figures (status_json's array),
  // written to operators.json, for a failed job the cause, and the end-of-run warnings about
  // the data (a node that dropped everything, a field no record had), written into job.json.
  // Set before the last update().
  void set_final_report(std::string operators_json, std::optional<FailureCause> failure,
                        std::vector<std::string> warnings = {}) {
    final_operators_ = std::move(operators_json);
    failure_ = std::move(failure);
    warnings_ = std::move(warnings);
  }
  void remove_sockets() const;
  // Whether job.json has been written.
  bool published() const { return published_; }

private:
  void make_socket_dir();
  void discard_unpublished();

  bool created_dir_ = false; // this registration made dir_ (not a restart's)
  bool published_ = false;   // job.json was written
  std::string id_;
  std::string name_;
  std::filesystem::path dir_;
  std::filesystem::path socket_dir_;
  std::string started_;
  std::string control_endpoint_;
  std::string last_checkpoint_;
  std::string pipeline_file_;
  std::string base_dir_;
  std::string final_operators_;
  std::optional<FailureCause> failure_;
  std::vector<std::string> warnings_;
};

// What write_pipeline wrote into a job directory; the text is empty when pipeline.toml is
// missing, and the variables too for a job of a release before ${NAME}.
struct StoredPipeline {
  bool found = false;
  std::string text;
  std::vector<std::string> overrides;
  std::map<std::string, std::string> variables;
};
StoredPipeline read_stored_pipeline(const std::filesystem::path& job_dir);

} // namespace streamctl::runtime
