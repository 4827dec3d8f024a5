#include "pipeline/runtime/coordinator.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <zmq.hpp>

#include "pipeline/runtime/child_process.hpp"
#include "pipeline/runtime/job_metrics.hpp"
#include "pipeline/runtime/job_registry.hpp"
#include "state/error.hpp"
#include "state/json_writer.hpp"
#include "transport/control.hpp"

namespace streamctl::runtime {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kStartupTimeout = 60s;
constexpr auto kCancelGrace = 2s;
constexpr auto kProgressEvery = 10s;

// Blocks SIGINT, SIGTERM and SIGCHLD for the life of the object and reads them from a
// signalfd, so the coordinator's one poll loop sees signals, control messages and child exits
// in order, with no async handler.
class SignalChannel {
public:
  SignalChannel() {
    sigemptyset(&mask_);
    sigaddset(&mask_, SIGINT);
    sigaddset(&mask_, SIGTERM);
    sigaddset(&mask_, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &mask_, &previous_);
    fd_ = ::signalfd(-1, &mask_, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd_ < 0) throw Error(ErrorKind::Internal, std::string("signalfd: ") + std::strerror(errno));
  }
  ~SignalChannel() {
    ::close(fd_);
    ::sigprocmask(SIG_SETMASK, &previous_, nullptr);
  }
  int fd() const { return fd_; }
  // The next pending signal number, or 0.
  int next() {
    signalfd_siginfo info{};
    if (::read(fd_, &info, sizeof info) != sizeof info) return 0;
    return static_cast<int>(info.ssi_signo);
  }

private:
  sigset_t mask_{}, previous_{};
  int fd_ = -1;
};

struct TaskRuntime {
  const pipeline::Task* task = nullptr;
  std::string label; // "clicks -> ok[1]"
  std::unique_ptr<ChildProcess> process;
  std::string endpoint;
  bool ready = false;
  bool finished = false;
  std::vector<NodeMetrics> metrics;
};

class Coordinator {
public:
  Coordinator(const LoadedJob& job, const RunOptions& options, spdlog::logger& log)
      : job_(job), options_(options), log_(log), control_(context_, zmq::socket_type::router) {}

  ~Coordinator() {
    tasks_.clear(); // kills and reaps any worker still running
    control_.close();
  }

  RunOutcome run() {
    registration_ = std::make_unique<JobRegistration>(options_.state_dir, job_.spec);
    outcome_.job_id = registration_->id();
    registration_->write_pipeline(job_.text, job_.overrides);
    if (options_.on_registered) options_.on_registered(outcome_.job_id, registration_->dir());

    control_.set(zmq::sockopt::linger, 0);
    control_.set(zmq::sockopt::router_mandatory, true);
    std::string bind = options_.transport == "tcp"
                           ? std::string("tcp://127.0.0.1:*")
                           : "ipc://" + (registration_->socket_dir() / "control.sock").string();
    control_.bind(bind);
    std::string endpoint = control_.get(zmq::sockopt::last_endpoint);
    registration_->set_control_endpoint(endpoint);

    start_workers(endpoint);
    registration_->update("running", pids());
    log_.info("job {} started: {} worker(s)", outcome_.job_id, tasks_.size());

    if (await_ready() && start_data_flow()) supervise();
    finish_registration();
    return outcome_;
  }

private:
  void start_workers(const std::string& control_endpoint) {
    for (const auto& task : job_.plan.tasks) {
      const pipeline::Chain& chain = job_.plan.chains[static_cast<std::size_t>(task.chain)];
      TaskRuntime rt;
      rt.task = &task;
      rt.label = pipeline::chain_label(job_.spec, chain) + "[" + std::to_string(task.subtask) + "]";
      ChildSpec spec;
      spec.executable = options_.self_executable;
      spec.args = {"worker",
                   "--job-dir", registration_->dir().string(),
                   "--base-dir", job_.spec.base_dir.string(),
                   "--file-name", job_.spec.file.string(),
                   "--socket-dir", registration_->socket_dir().string(),
                   "--task", std::to_string(task.id),
                   "--coordinator", control_endpoint,
                   "--transport", options_.transport};
      spec.args.insert(spec.args.end(), options_.worker_log_flags.begin(), options_.worker_log_flags.end());
      const pipeline::NodeSpec& head = job_.spec.nodes[chain.nodes.front()];
      spec.inherit_stdin = head.role == pipeline::NodeRole::Source && head.type == "stdin";
      rt.process = std::make_unique<ChildProcess>(spec);
      tasks_.push_back(std::move(rt));
    }
  }

  std::map<std::string, int> pids() const {
    std::map<std::string, int> out;
    for (const auto& t : tasks_) out[t.label] = t.process->pid();
    return out;
  }

  // Every worker binds its input and says where; false when the job ended first.
  bool await_ready() {
    auto deadline = Clock::now() + kStartupTimeout;
    while (!all_of([](const TaskRuntime& t) { return t.ready; })) {
      if (Clock::now() > deadline) {
        fail("workers did not start within " + std::to_string(kStartupTimeout.count()) + "s");
        return false;
      }
      if (!poll_once(200ms)) return false;
    }
    return true;
  }

  bool start_data_flow() {
    transport::ControlMessage start{"START", {}};
    for (const auto& t : tasks_)
      if (!t.endpoint.empty()) start.set("endpoint." + std::to_string(t.task->id), t.endpoint);
    for (const auto& t : tasks_) send(t, start);
    log_.info("all {} worker(s) ready: records flowing", tasks_.size());
    // A STOP sent before a worker had connected was dropped by the ROUTER: say it again.
    if (stopping_) {
      transport::ControlMessage stop{"STOP", {}};
      for (const auto& t : tasks_) send(t, stop);
    }
    return true;
  }

  void supervise() {
    auto next_progress = Clock::now() + kProgressEvery;
    while (!all_of([](const TaskRuntime& t) { return t.finished; })) {
      if (!poll_once(1000ms)) return;
      if (Clock::now() >= next_progress) {
        log_.info("progress: {}", describe_totals());
        next_progress += kProgressEvery;
      }
    }
    // Every task said FINISHED, so every end of input has been read: let the workers go, and
    // wait for them to exit so that their output is flushed.
    transport::ControlMessage release{"RELEASE", {}};
    for (const auto& t : tasks_) send(t, release);
    for (auto& t : tasks_) {
      if (!t.process->running()) continue;
      int status = 0;
      if (::waitpid(t.process->pid(), &status, 0) == t.process->pid()) t.process->reaped(status);
    }
    for (const auto& t : tasks_) log_.debug("{}: {}", t.label, encode_metrics(t.metrics));
    log_.info("job {} finished: {}", outcome_.job_id, describe_totals());
  }

  // Handles what arrives within `timeout`. Returns false when the job has ended.
  bool poll_once(std::chrono::milliseconds timeout) {
    zmq::pollitem_t items[] = {{control_.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, signals_.fd(), ZMQ_POLLIN, 0}};
    zmq::poll(items, 2, timeout);
    if (items[0].revents & ZMQ_POLLIN) {
      zmq::message_t identity, body;
      while (control_.recv(identity, zmq::recv_flags::dontwait)) {
        if (!control_.recv(body, zmq::recv_flags::dontwait)) break;
        auto message = transport::decode_control(body.to_string_view());
        if (message && is_client_command(*message)) handle_client(identity.to_string(), *message);
        else if (message) handle_message(*message);
        if (ended_) return false;
      }
    }
    if (items[1].revents & ZMQ_POLLIN)
      while (int sig = signals_.next()) {
        handle_signal(sig);
        if (ended_) return false;
      }
    return !ended_;
  }

  void handle_message(const transport::ControlMessage& m) {
    auto index = static_cast<std::size_t>(m.get_int("task", -1));
    if (index >= tasks_.size()) return;
    TaskRuntime& t = tasks_[index];
    if (m.type == "READY") {
      t.ready = true;
      t.endpoint = m.get("endpoint");
    } else if (m.type == "HEARTBEAT") {
      t.metrics = decode_metrics(m.get("metrics"));
    } else if (m.type == "FINISHED") {
      t.finished = true;
      t.metrics = decode_metrics(m.get("metrics"));
    } else if (m.type == "FAILED" && m.get("kind") == "output_closed") {
      // Like `yes | head`: the reader has what it wanted; end quietly, as SIGPIPE would.
      log_.info("the reader of stdout has gone: stopping the job");
      outcome_.exit_code = exit_code_for(ErrorKind::OutputClosed);
      fail("");
    } else if (m.type == "FAILED") {
      fail(m.get("message") + " (in " + m.get("chain") + ")");
    }
  }

  // Commands of `streamctl status|stop|cancel JOB`, from a DEALER that connects to the
  // control socket for one request (pipeline/runtime/job_client.hpp); workers never send them.
  static bool is_client_command(const transport::ControlMessage& m) {
    return m.type == "STATUS" || m.type == "STOP_JOB" || m.type == "CANCEL_JOB";
  }

  void handle_client(const std::string& identity, const transport::ControlMessage& m) {
    transport::ControlMessage reply{"OK", {}};
    if (m.type == "STATUS") {
      reply.set("state", stopping_ ? "stopping" : "running").set("operators", status_json());
    } else if (m.type == "STOP_JOB") {
      log_.warn("stop requested by streamctl stop: stopping the job gracefully");
      request_stop();
    }
    std::string body = transport::encode_control(reply);
    try {
      control_.send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      control_.send(zmq::buffer(body), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      // The client went away; nothing to tell it.
    }
    if (m.type == "CANCEL_JOB") {
      log_.warn("cancelled by streamctl cancel");
      outcome_.exit_code = 1;
      outcome_.error = "the job was cancelled (streamctl cancel)";
      cancel_all();
      final_state_ = "cancelled";
      ended_ = true;
    }
  }

  // SPEC §2 `status --json`'s operators: [{name, parallelism, subtasks: [{index, host, pid,
  // records_in, records_out, bad_records}]}], from the workers' latest heartbeats.
  std::string status_json() const {
    std::string out = "[";
    for (std::size_t n = 0; n < job_.spec.nodes.size(); ++n) {
      const pipeline::NodeSpec& node = job_.spec.nodes[n];
      if (n) out += ",";
      out += "{\"name\":";
      state::append_json_string(node.name, out);
      out += ",\"type\":";
      state::append_json_string(node.type, out);
      out += ",\"parallelism\":" + std::to_string(job_.spec.parallelism_of(node)) + ",\"subtasks\":[";
      bool first = true;
      for (const auto& t : tasks_) {
        const auto& chain = job_.plan.chains[static_cast<std::size_t>(t.task->chain)];
        if (std::find(chain.nodes.begin(), chain.nodes.end(), n) == chain.nodes.end()) continue;
        NodeMetrics m{node.name};
        for (const auto& reported : t.metrics)
          if (reported.node == node.name) m = reported;
        out += first ? "" : ",";
        first = false;
        out += "{\"index\":" + std::to_string(t.task->subtask) + ",\"host\":\"localhost\",\"pid\":" +
               std::to_string(t.process->pid()) + ",\"records_in\":" + std::to_string(m.records_in) +
               ",\"records_out\":" + std::to_string(m.records_out) +
               ",\"bad_records\":" + std::to_string(m.bad_records) + "}";
      }
      out += "]}";
    }
    return out + "]";
  }

  // Sources end their input as if it were exhausted, so the job drains and commits.
  void request_stop() {
    if (stopping_) return;
    stopping_ = true;
    transport::ControlMessage stop{"STOP", {}};
    for (const auto& t : tasks_) send(t, stop);
  }

  void handle_signal(int sig) {
    if (sig == SIGCHLD) {
      reap_children();
      return;
    }
    ++signals_received_;
    int code = sig == SIGINT ? 130 : 143;
    if (signals_received_ == 1) {
      log_.warn("{} received: stopping the job gracefully (send it again to cancel)", ::strsignal(sig));
      outcome_.exit_code = code;
      request_stop();
    } else {
      log_.warn("{} received again: cancelling the job", ::strsignal(sig));
      outcome_.exit_code = code;
      cancel_all();
      final_state_ = "cancelled";
      ended_ = true;
    }
  }

  void reap_children() {
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      for (auto& t : tasks_) {
        if (t.process->pid() != pid) continue;
        t.process->reaped(status);
        bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!(t.finished && clean) && !ended_) {
          // A FAILED message, if the worker managed to send one, is the better reason.
          drain_messages();
          if (!ended_ && !(t.finished && clean))
            fail("worker for " + t.label + " (pid " + std::to_string(pid) + ") " + t.process->describe_exit());
        }
      }
    }
  }

  void drain_messages() {
    zmq::message_t identity, body;
    while (!ended_ && control_.recv(identity, zmq::recv_flags::dontwait)) {
      if (!control_.recv(body, zmq::recv_flags::dontwait)) break;
      if (auto m = transport::decode_control(body.to_string_view())) handle_message(*m);
    }
  }

  void fail(const std::string& reason) {
    if (ended_) return;
    outcome_.error = reason;
    if (outcome_.exit_code == 0) outcome_.exit_code = 1;
    final_state_ = "failed";
    cancel_all();
    ended_ = true;
  }

  // CANCEL, a grace period to abort sinks, then SIGKILL.
  void cancel_all() {
    transport::ControlMessage cancel{"CANCEL", {}};
    for (const auto& t : tasks_) send(t, cancel);
    auto deadline = Clock::now() + kCancelGrace;
    for (auto& t : tasks_) {
      while (t.process->running() && Clock::now() < deadline) {
        int status = 0;
        if (::waitpid(t.process->pid(), &status, WNOHANG) == t.process->pid()) t.process->reaped(status);
        else std::this_thread::sleep_for(10ms);
      }
      t.process->kill_and_reap();
    }
  }

  void send(const TaskRuntime& t, const transport::ControlMessage& m) {
    if (!t.process->running()) return;
    std::string id = "task-" + std::to_string(t.task->id);
    std::string body = transport::encode_control(m);
    try {
      control_.send(zmq::buffer(id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      control_.send(zmq::buffer(body), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      // The worker is gone (router_mandatory): its exit is handled through SIGCHLD.
    }
  }

  std::string describe_totals() const {
    std::vector<std::vector<NodeMetrics>> per_task;
    for (const auto& t : tasks_) per_task.push_back(t.metrics);
    JobTotals totals = sum_metrics(job_.spec, per_task);
    double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.0f", seconds > 0 ? static_cast<double>(totals.read) / seconds : 0.0);
    return std::to_string(totals.read) + " records read, " + std::to_string(totals.written) + " written, " +
           std::to_string(totals.bad) + " bad, " + rate + " records/s read";
  }

  template <typename P> bool all_of(P predicate) const {
    for (const auto& t : tasks_)
      if (!predicate(t)) return false;
    return true;
  }

  void finish_registration() {
    if (final_state_.empty()) final_state_ = stopping_ ? "stopped" : "finished";
    registration_->update(final_state_, pids());
    registration_->remove_sockets();
  }

  const LoadedJob& job_;
  const RunOptions& options_;
  spdlog::logger& log_;
  SignalChannel signals_;
  zmq::context_t context_;
  zmq::socket_t control_;
  std::unique_ptr<JobRegistration> registration_;
  std::vector<TaskRuntime> tasks_;
  RunOutcome outcome_;
  std::string final_state_;
  Clock::time_point started_ = Clock::now();
  int signals_received_ = 0;
  bool stopping_ = false;
  bool ended_ = false;
};

} // namespace

RunOutcome run_job(const LoadedJob& job, const RunOptions& options, spdlog::logger& log) {
  Coordinator coordinator(job, options, log);
  return coordinator.run();
}

} // namespace streamctl::runtime
