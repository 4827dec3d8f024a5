#include "pipeline/runtime/worker_pool.hpp"

#include <algorithm>
#include <set>
#include <sys/wait.h>
#include <thread>

#include "pipeline/spec/schema_check.hpp"
#include "pipeline/spec/worker_sharing.hpp"

namespace streamctl::runtime {

using namespace std::chrono_literals;

namespace {

constexpr auto kCancelGrace = 2s;
constexpr auto kHaltGrace = 10s;

} // namespace

void WorkerPool::start(const LoadedJob& job, const AttemptArgs& args, std::map<int, ParkedWorker> kept) {
  attempt_ = args.attempt;
  std::vector<int> to_launch; // task ids, for new processes
  for (const auto& task : job.plan.tasks) {
    const pipeline::Chain& chain = job.plan.chains[static_cast<std::size_t>(task.chain)];
    const pipeline::NodeSpec& head = job.spec.nodes[chain.nodes.front()];
    TaskRuntime rt;
    rt.task = &task;
    rt.label = pipeline::chain_label(job.spec, chain) + "[" + std::to_string(task.subtask) + "]";
    rt.source = head.role == pipeline::NodeRole::Source;
    auto id = static_cast<std::size_t>(task.id);
    if (id < args.hosts.size()) rt.host = args.hosts[id];
    rt.last_seen = Clock::now();

    if (auto it = kept.find(task.id); it != kept.end()) {
      // It starts this task as a new worker would, keeping what its old one holds of it.
      ParkedWorker& worker = it->second;
      control_.send(ControlChannel::task_identity(worker.old_task, worker.old_attempt),
                    transport::ControlMessage{"REASSIGN", {}}
                        .set("task", std::to_string(task.id))
                        .set("attempt", std::to_string(args.attempt))
                        .set("restore", args.restore.string()));
      rt.process = std::move(worker.process);
    } else {
      to_launch.push_back(task.id);
    }
    tasks_.push_back(std::move(rt));
  }
  for (const auto& group : pipeline::group_tasks_into_workers(job.spec, job.plan, to_launch, args.hosts))
    launch(job, args, group);
}

void WorkerPool::launch(const LoadedJob& job, const AttemptArgs& args, const std::vector<int>& group) {
  // tasks_ is in task id order (start() pushes one per task of the plan).
  TaskRuntime& first = tasks_[static_cast<std::size_t>(group.front())];
  const pipeline::Chain& chain = job.plan.chains[static_cast<std::size_t>(first.task->chain)];
  WorkerLaunch launch;
  launch.task = first.task->id;
  launch.host = first.host;
  launch.worker_args = {"--job-dir",     args.job_dir.string(),   "--base-dir",   job.spec.base_dir.string(),
                        "--file-name",   job.spec.file.string(),  "--socket-dir", args.socket_dir.string(),
                        "--coordinator", args.control_endpoint,   "--transport",  args.transport,
                        "--attempt",     std::to_string(args.attempt)};
  auto& argv = launch.worker_args;
  for (int id : group) {
    const TaskRuntime& rt = tasks_[static_cast<std::size_t>(id)];
    launch.label += (launch.label.empty() ? "" : ", ") + rt.label;
    argv.insert(argv.end(), {"--task", std::to_string(id)});
  }
  if (!args.restore.empty()) argv.insert(argv.end(), {"--restore", args.restore.string()});
  if (!args.spool_dir.empty())
    argv.insert(argv.end(), {"--spool-dir", args.spool_dir.string(), "--run-tag", args.run_tag});
  argv.insert(argv.end(), args.log_flags.begin(), args.log_flags.end());
  // A task that reads stdin runs alone (worker_sharing.hpp).
  launch.inherit_stdin = first.source && job.spec.nodes[chain.nodes.front()].type == "stdin";
  launch.bootstrap = args.bootstrap;
  std::shared_ptr<ChildProcess> process = launcher_.start(launch);
  for (int id : group) {
    TaskRuntime& rt = tasks_[static_cast<std::size_t>(id)];
    rt.process = process;
    rt.last_seen = Clock::now();
  }
}

std::optional<std::size_t> WorkerPool::sender_of(const transport::ControlMessage& m) const {
  auto index = static_cast<std::size_t>(m.get_int("task", -1));
  if (index >= tasks_.size() || m.get_int("attempt", -1) != attempt_)
    return std::nullopt; // an older attempt's
  return index;
}

bool WorkerPool::all_ready() const {
  for (const auto& t : tasks_)
    if (!t.ready) return false;
  return true;
}

bool WorkerPool::all_finished() const {
  for (const auto& t : tasks_)
    if (!t.finished) return false;
  return true;
}

bool WorkerPool::none_finished() const {
  for (const auto& t : tasks_)
    if (t.finished) return false;
  return true;
}

std::size_t WorkerPool::process_count() const {
  std::set<const ChildProcess*> processes;
  for (const auto& t : tasks_) processes.insert(t.process.get());
  return processes.size();
}

std::size_t WorkerPool::source_count() const {
  std::size_t n = 0;
  for (const auto& t : tasks_)
    n += t.source ? 1 : 0;
  return n;
}

std::map<std::string, int> WorkerPool::pids() const {
  std::map<std::string, int> out;
  for (const auto& t : tasks_)
    out[t.label] = t.process->running() ? t.process->pid() : 0;
  return out;
}

void TaskRuntime::record_report(Clock::time_point now, std::vector<NodeMetrics> reported,
                                const TaskLoad& reported_load) {
  metrics = std::move(reported);
  load = reported_load;
  history.push_back(Report{now, metrics, load});
  // A minute of reports for the 1-minute rates, and at least two for the latest interval.
  constexpr auto kKept = std::chrono::seconds(61);
  while (history.size() > 2 && now - history[1].at >= kKept) history.pop_front();
}

std::vector<std::vector<NodeMetrics>> WorkerPool::metrics() const {
  std::vector<std::vector<NodeMetrics>> out;
  for (const auto& t : tasks_)
    out.push_back(t.metrics);
  return out;
}

void WorkerPool::send(const TaskRuntime& task, const transport::ControlMessage& message) {
  if (!task.process->running()) return;
  control_.send(ControlChannel::task_identity(task.task->id, attempt_), message);
}

void WorkerPool::send_all(const transport::ControlMessage& message) {
  for (const auto& t : tasks_)
    send(t, message);
}

void WorkerPool::send_sources(const transport::ControlMessage& message) {
  for (const auto& t : tasks_)
    if (t.source) send(t, message);
}

void WorkerPool::cancel_all() {
  end_all("CANCEL", kCancelGrace, 10ms);
}

void WorkerPool::halt_all(const std::vector<int>& park) {
  end_all("HALT", kHaltGrace, 5ms, park);
}

std::map<int, ParkedWorker> WorkerPool::take_parked() {
  std::map<int, ParkedWorker> out;
  for (auto& t : tasks_)
    if (t.parked && t.process && t.process->running())
      out[t.task->id] = ParkedWorker{t.task->id, attempt_, std::move(t.process)};
  std::erase_if(tasks_, [](const TaskRuntime& t) { return !t.process; });
  return out;
}

void WorkerPool::end_all(const char* message, std::chrono::milliseconds grace,
                         std::chrono::milliseconds poll, const std::vector<int>& park) {
  for (auto& t : tasks_) {
    t.parked = std::find(park.begin(), park.end(), t.task->id) != park.end();
    transport::ControlMessage m{message, {}};
    if (t.parked) m.set("park", "1");
    if (std::string_view(message) == "CANCEL") m.set("completed", std::to_string(completed_));
    send(t, m);
  }
  // A process that a parked task shares goes on: its other tasks end, it does not.
  std::set<const ChildProcess*> staying;
  for (const auto& t : tasks_)
    if (t.parked) staying.insert(t.process.get());
  auto deadline = Clock::now() + grace;
  for (auto& t : tasks_) {
    if (staying.count(t.process.get())) continue;
    while (t.process->running() && Clock::now() < deadline) {
      int status = 0;
      if (::waitpid(t.process->pid(), &status, WNOHANG) == t.process->pid())
        t.process->reaped(status);
      else
        std::this_thread::sleep_for(poll);
    }
    t.process->kill_and_reap();
  }
}

WorkerPool::Release WorkerPool::release(const std::function<bool()>& wait,
                                        const std::function<void(const ControlChannel::Incoming&)>& serve) {
  send_all(transport::ControlMessage{"RELEASE", {}});
  Release out;
  std::vector<std::string> reasons;
  bool other = false;
  // After RELEASE a failure is not restarted: a FAILED message only explains an exit.
  auto read_messages = [&] {
    while (auto in = control_.receive()) {
      const auto& m = in->message;
      if (!m || m->type != "FAILED" || m->get_int("attempt", -1) != attempt_) {
        serve(*in);
        continue;
      }
      reasons.push_back(m->get("message") + " (in " + m->get("chain") + ")");
      (m->get("kind") == "output_closed" ? out.reader_gone : other) = true;
    }
  };
  for (;;) {
    bool running = false;
    for (auto& t : tasks_) {
      if (!t.process->running()) continue;
      int status = 0;
      pid_t reaped = ::waitpid(t.process->pid(), &status, WNOHANG);
      if (reaped == 0) running = true;
      if (reaped != t.process->pid()) continue;
      t.process->reaped(status);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) out.unclean.push_back(t.label);
    }
    read_messages();
    if (!running) break;
    if (wait()) {
      out.cancelled = true;
      return out;
    }
  }
  if (out.unclean.empty()) return out;
  out.reasons = pipeline::detail::join(reasons, "; ");
  out.reader_gone = out.reader_gone && !other;
  return out;
}

std::optional<WorkerPool::Reaped> WorkerPool::reap_next() {
  int status = 0;
  pid_t pid = ::waitpid(-1, &status, WNOHANG);
  if (pid <= 0) return std::nullopt;
  TaskRuntime* named = nullptr;
  for (auto& t : tasks_) {
    if (!t.process || t.process->pid() != pid || !t.process->running()) continue;
    if (!named || (named->finished && !t.finished)) named = &t;
  }
  if (named) named->process->reaped(status);
  return Reaped{pid, named};
}

std::optional<std::string> WorkerPool::kill_silent_worker(Clock::time_point now,
                                                          std::chrono::milliseconds timeout) {
  for (auto& t : tasks_) {
    if (!t.process->running() || t.finished || now - t.last_seen < timeout) continue;
    auto silent = std::chrono::duration_cast<std::chrono::seconds>(now - t.last_seen).count();
    t.process->kill_and_reap();
    return "worker for " + t.label + " (pid " + std::to_string(t.process->pid()) +
           ") sent no heartbeat for " + std::to_string(silent) + " s";
  }
  return std::nullopt;
}

} // namespace streamctl::runtime
