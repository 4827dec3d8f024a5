#pragma once
// `streamctl tap JOB NODE`: copies of the records leaving one node of a running job, sent
// beside the data, never in it (the job's output and its exactly-once guarantee do not
// change). Control messages (transport/control.hpp) between three parties:
//
//   client -> coordinator   TAP     tap=ID node=NAME sample=P limit=N
//                           sent again every kTapRenewEvery as a lease; the first opens the tap
//                           UNTAP   tap=ID            the client is done
//   coordinator -> client   TAP_OK  tap=ID subtasks=K  answers every TAP
//                           ERROR   message=TEXT usage=1   no such node
//                           TAP_RECORDS tap=ID lines=JSONL skipped=N
//                           TAP_END tap=ID message=TEXT    the job ended
//   coordinator -> worker   TAP     tap=ID node=NAME sample=P limit=N  (renews the lease too)
//                           UNTAP   tap=ID
//   worker -> coordinator   TAPPED  tap=ID lines=JSONL skipped=N
//
// Leases on both sides: a coordinator forgets a tap whose client has not renewed it for
// kTapLease (a client killed with -9 sends no UNTAP), and a worker one that its coordinator
// has not renewed for as long (a worker restarted after a failure, or started by a rescale,
// gets the tap with the next renewal). A tap costs the data path one test per batch while no
// tap is open.
//
// Lines are JSON records ("\n"-terminated). A worker sends what it copied every
// kTapFlushEvery, at most kTapMaxBytes at a time; records beyond that, or beyond `limit`
// copies per worker, are skipped and counted (a tap shows what it can, and says what it
// could not show).

#include <chrono>
#include <cstddef>

namespace streamctl::runtime {

inline constexpr auto kTapRenewEvery = std::chrono::seconds(1);
inline constexpr auto kTapLease = std::chrono::seconds(5);
inline constexpr auto kTapFlushEvery = std::chrono::milliseconds(100);
inline constexpr std::size_t kTapMaxBytes = 256 * 1024;

} // namespace streamctl::runtime
