#pragma once
// Session windows of a window node (`window = { kind = "session", gap = ... }`, SPEC §6).
//
// Per key, a record at time t makes the window [t, t + gap) and merges with every session of
// its key that it overlaps or touches, so that records at most `gap` apart share a session; a
// session runs from its first record to its last plus gap. Merging combines the sessions'
// aggregate blocks with Aggregates::merge, earliest session first (a later session counts as
// having arrived later, for first/last); the record itself is added to the earliest one.
// Firing, lateness and the end of input are as for the other kinds (window.hpp); a record is
// late when it touches no session still held and t + gap + allowed_lateness is at or below the
// watermark.

#include <memory>

#include "operators/window.hpp"

namespace streamctl::operators {

std::unique_ptr<Operator> make_session_windows(WindowSettings settings);

} // namespace streamctl::operators
